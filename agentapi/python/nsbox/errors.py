"""The errors of the nsbox client: one class per error class of the daemon
(docs/API.md, "Errors"), and the client's own (unreachable, timed out)."""

from __future__ import annotations

from typing import Optional

__all__ = [
    "NsboxError", "DaemonUnreachable", "InvalidArgument", "Forbidden", "NotFound",
    "Conflict", "SessionDead", "SessionBusy", "SessionParked", "Exists", "InUse", "PayloadTooLarge", "ResourceExhausted", "InternalError", "BadGateway", "Unavailable", "RequestTimeout",
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


class Conflict(NsboxError):
    """409: the request conflicts with the state of a session or a name; the
    subclass says which (an unknown 409 code is a plain Conflict)."""


class SessionDead(Conflict):
    """409 session_dead: the session died (OOM, crash, its lifetime); its
    info() says why. Delete it and start another."""


class SessionBusy(Conflict):
    """409 session_busy: the session is running an exec, and pause, fork
    and park do not wait for it. It is alive: retry once the exec is over."""


class SessionParked(Conflict):
    """409 session_parked: the session is parked; exec() or revive() brings
    it back."""


class Exists(Conflict):
    """409 exists: the name is taken (a volume), or a file of another kind
    is in the way (a directory where a file goes, or the reverse)."""


class InUse(Conflict):
    """409 in_use: the volume is mounted by a live run or session."""


class PayloadTooLarge(NsboxError):
    """413."""


class ResourceExhausted(NsboxError):
    """429: every run slot or session is taken; retry after retry_after."""


class InternalError(NsboxError):
    """500: the sandbox could not be set up."""


class BadGateway(NsboxError):
    """502 bad_gateway: a request to a session's port (Session.port) found
    nothing listening on it, or its server closed without an HTTP answer."""


class Unavailable(NsboxError):
    """503: the daemon is shutting down."""


# The error of an answer is its code's class, else its status's (a body
# that is not the daemon's, or a code this client does not know).
BY_STATUS = {
    400: InvalidArgument, 403: Forbidden, 404: NotFound, 409: Conflict,
    413: PayloadTooLarge, 429: ResourceExhausted, 500: InternalError, 502: BadGateway, 503: Unavailable,
}

BY_CODE = {
    "invalid_argument": InvalidArgument, "forbidden": Forbidden, "not_found": NotFound,
    "session_dead": SessionDead, "session_busy": SessionBusy, "session_parked": SessionParked,
    "exists": Exists, "in_use": InUse, "payload_too_large": PayloadTooLarge, "resource_exhausted": ResourceExhausted,
    "internal": InternalError, "bad_gateway": BadGateway, "unavailable": Unavailable,
}
