"""Deprecated: the one-file client became the `nsbox` package.

`pip install ./agentapi/python` and `import nsbox`. This shim keeps
`from nsbox_client import Client` working for one release (pip installs it
with the package).
"""

import warnings

from nsbox import (DEFAULT_SOCKET, Client, DaemonUnreachable, Forbidden, InternalError, InvalidArgument, NotFound,
                   NsboxError, PayloadTooLarge, ResourceExhausted, Result, Session, SessionDead, Unavailable)

__all__ = [
    "Client", "Session", "Result", "DEFAULT_SOCKET",
    "NsboxError", "DaemonUnreachable", "InvalidArgument", "Forbidden", "NotFound",
    "SessionDead", "PayloadTooLarge", "ResourceExhausted", "InternalError", "Unavailable",
]

warnings.warn("nsbox_client is deprecated: import nsbox (pip install ./agentapi/python)", DeprecationWarning,
              stacklevel=2)
