"""nsbox: a standard-library Python client for the nsbox sandbox daemon.

    import nsbox

    r = nsbox.Client().run(code="print(6 * 7)")
    print(r.stdout, r.status)              # "42\\n" "ok"

docs/PYTHON.md describes the package.
"""

from .client import DEFAULT_SOCKET, Client, Result, Session
from .errors import (DaemonUnreachable, Forbidden, InternalError, InvalidArgument, NotFound, NsboxError,
                     PayloadTooLarge, ResourceExhausted, SessionDead, Unavailable)

__version__ = "0.1.0"

__all__ = [
    "Client", "Session", "Result", "DEFAULT_SOCKET",
    "NsboxError", "DaemonUnreachable", "InvalidArgument", "Forbidden", "NotFound",
    "SessionDead", "PayloadTooLarge", "ResourceExhausted", "InternalError", "Unavailable",
]
