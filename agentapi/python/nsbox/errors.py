"""The errors of the nsbox client: one class per error class of the daemon
(docs/API.md, "Errors"), and the client's own (unreachable, timed out)."""

from __future__ import annotations

from typing import Optional

__all__ = [
    "NsboxError", "DaemonUnreachable", "InvalidArgument", "Forbidden", "NotFound",
    "SessionDead", "PayloadTooLarge", "ResourceExhausted", "InternalError", "Unavailable", "RequestTimeout",
]


class NsboxError(Exception):
    """An error answer of the daemon: code (e.g. "invalid_argument"),
    message, HTTP status and, on 429/503, retry_after seconds."""

    def __init__(self, code: str, message: str, status: int = 0, retry_after: Optional[int] = None):
        super().__init__("nsbox: %s: %s" % (code, message))
        self.code = code
        self.message = message
        self.status = status
        self.retry_after = retry_after


class DaemonUnreachable(NsboxError):
    """The daemon's socket does not answer (is `nsbox daemon` running?); the
    message names the socket and how to start the daemon."""


class RequestTimeout(NsboxError, TimeoutError):
    """The daemon did not answer within the client's deadline (the run's own
    time limit plus a margin, or the client's timeout)."""


class InvalidArgument(NsboxError):
    """400: a malformed request, a bad path, a limit above the maximum."""


class Forbidden(NsboxError):
    """403."""


class NotFound(NsboxError):
    """404: no such session or workspace file."""


class SessionDead(NsboxError):
    """409: the session died (OOM, crash)."""


class PayloadTooLarge(NsboxError):
    """413."""


class ResourceExhausted(NsboxError):
    """429: every run slot or session is taken; retry after retry_after."""


class InternalError(NsboxError):
    """500: the sandbox could not be set up."""


class Unavailable(NsboxError):
    """503: the daemon is shutting down."""


BY_STATUS = {
    400: InvalidArgument, 403: Forbidden, 404: NotFound, 409: SessionDead,
    413: PayloadTooLarge, 429: ResourceExhausted, 500: InternalError, 503: Unavailable,
}

BY_CODE = {
    "invalid_argument": InvalidArgument, "forbidden": Forbidden, "not_found": NotFound,
    "session_dead": SessionDead, "payload_too_large": PayloadTooLarge, "resource_exhausted": ResourceExhausted,
    "internal": InternalError, "unavailable": Unavailable,
}
