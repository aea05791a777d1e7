"""nsbox: a standard-library Python client for the nsbox sandbox daemon.

    import nsbox

    r = nsbox.Client().run(code="print(6 * 7)")
    print(r.stdout, r.status)              # "42\\n" "ok"

nsbox.Client and nsbox.Session are synchronous; nsbox.AsyncClient and
nsbox.AsyncSession (nsbox.aio) are the same on asyncio; Session.terminal
(nsbox.terminal) opens a terminal in a session, Session.port (nsbox.ports)
reaches a server it runs. The adapters in the
shapes agent frameworks use are in nsbox.executors (SecureExecutor,
CodeExecutionTool, CodeExecutor, ResourceLimits) and nsbox.tools
(CodeExecutionSession, PythonExecTool). docs/PYTHON.md describes the package.
"""

from .aio import AsyncClient, AsyncSession, AsyncVolume, AsyncWatch
from .client import DEFAULT_SOCKET, Batch, Client, Result, Retry, Session, Volume, Watch
from .errors import (BadGateway, Conflict, DaemonUnreachable, Exists, Forbidden, InternalError, InUse, InvalidArgument, NotFound,
                     NsboxError, PayloadTooLarge, RequestTimeout, ResourceExhausted, SessionBusy, SessionDead,
                     SessionParked, Unavailable)
from .ports import AsyncForward, AsyncPort, AsyncPortResponse, Forward, Port, PortResponse
from .terminal import AsyncTerminal, Terminal
from .executors import CodeExecutionTool, CodeExecutor, ExecutionResult, ResourceLimits, SecureExecutor
from .tools import CodeExecutionSession, PythonExecTool

__version__ = "0.1.0"

__all__ = [
    "Client", "Session", "Volume", "Watch", "AsyncClient", "AsyncSession", "AsyncVolume", "AsyncWatch", "Result", "Batch", "Retry", "DEFAULT_SOCKET",
    "NsboxError", "DaemonUnreachable", "RequestTimeout", "InvalidArgument", "Forbidden", "NotFound",
    "Conflict", "SessionDead", "SessionBusy", "SessionParked", "Exists", "InUse",
    "PayloadTooLarge", "ResourceExhausted", "InternalError", "BadGateway", "Unavailable",
    "Terminal", "AsyncTerminal", "Port", "PortResponse", "Forward", "AsyncPort", "AsyncPortResponse", "AsyncForward",
    "SecureExecutor", "CodeExecutionTool", "CodeExecutor", "ExecutionResult", "ResourceLimits",
    "CodeExecutionSession", "PythonExecTool",
]
