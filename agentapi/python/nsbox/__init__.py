"""nsbox: a standard-library Python client for the nsbox sandbox daemon.

    import nsbox

    r = nsbox.Client().run(code="print(6 * 7)")
    print(r.stdout, r.status)              # "42\\n" "ok"

nsbox.Client and nsbox.Session are synchronous; nsbox.AsyncClient and
nsbox.AsyncSession (nsbox.aio) are the same on asyncio. docs/PYTHON.md
describes the package.
"""

from .aio import AsyncClient, AsyncSession
from .client import DEFAULT_SOCKET, Client, Result, Retry, Session
from .errors import (DaemonUnreachable, Forbidden, InternalError, InvalidArgument, NotFound, NsboxError,
                     PayloadTooLarge, RequestTimeout, ResourceExhausted, SessionDead, Unavailable)

__version__ = "0.1.0"

__all__ = [
    "Client", "Session", "AsyncClient", "AsyncSession", "Result", "Retry", "DEFAULT_SOCKET",
    "NsboxError", "DaemonUnreachable", "RequestTimeout", "InvalidArgument", "Forbidden", "NotFound",
    "SessionDead", "PayloadTooLarge", "ResourceExhausted", "InternalError", "Unavailable",
]
