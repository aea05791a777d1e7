"""Deprecated: the one-file client became the `nsbox` package.

`pip install ./agentapi/python` and `import nsbox`. This shim keeps
`from nsbox_client import Client` working for one release (pip installs it
with the package).
"""

import warnings

from nsbox import (DEFAULT_SOCKET, Client, Conflict, DaemonUnreachable, Exists, Forbidden, InternalError, InUse,
                   InvalidArgument, NotFound, NsboxError, PayloadTooLarge, ResourceExhausted, Result, Session,
                   SessionBusy, SessionDead, SessionParked, Unavailable)

__all__ = [
    "Client", "Session", "Result", "DEFAULT_SOCKET",
    "NsboxError", "DaemonUnreachable", "InvalidArgument", "Forbidden", "NotFound",
    "Conflict", "SessionDead", "SessionBusy", "SessionParked", "Exists", "InUse",
    "PayloadTooLarge", "ResourceExhausted", "InternalError", "Unavailable",
]

warnings.warn("nsbox_client is deprecated: import nsbox (pip install ./agentapi/python)", DeprecationWarning,
              stacklevel=2)
