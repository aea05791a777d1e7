"""Executors in the shapes agent frameworks and their design documents use,
as thin layers over nsbox.Client: each call is one fresh sandbox.

- SecureExecutor(allowed_imports=None, execution_timeout=5).run(code) -> dict
  and CodeExecutionTool(executor).execute_code(code_snippet) -> dict: the
  smolagents-style executor and tool.
- CodeExecutor(language="python", timeout=30, max_memory_mb=512,
  max_cpu_percent=50).execute(code) -> ExecutionResult, and ResourceLimits
  with a security_level mapped onto the daemon's profiles.

allowed_imports is enforced inside the sandbox by the Python runner; it is a
policy aid for the agent's developer, not the security boundary (the
sandbox is). docs/PYTHON.md describes each shape.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Mapping, Optional

from ._wire import Files, Result
from .client import Client

__all__ = ["SecureExecutor", "CodeExecutionTool", "CodeExecutor", "ExecutionResult", "ResourceLimits",
           "SECURITY_LEVELS"]

#: security_level -> the daemon's built-in profile of that name.
SECURITY_LEVELS = ("strict", "standard", "permissive")

# What a non-ok status means, for the error dicts below.
_STATUS_ERRORS = {
    "timeout": ("TimeoutError", "the code ran past its time limit and was stopped"),
    "oom": ("MemoryError", "the code used more memory than its limit and was killed"),
    "output_limit": ("OutputLimitExceeded", "the code wrote more output than its limit and was stopped"),
    "killed": ("Killed", "the sandbox was killed"),
    "crashed": ("Crashed", "the Python interpreter died"),
    "cancelled": ("Cancelled", "the run was cancelled"),
    "error": ("SandboxError", "the sandbox could not run the code"),
}


def _check_code(code: Any, name: str = "code") -> str:
    if not isinstance(code, str):
        raise TypeError("%s must be a str of Python source code, not %s" % (name, type(code).__name__))
    return code


def error_info(r: Result) -> Optional[Dict[str, str]]:
    """{type, message, traceback} for a result that is not ok, else None."""
    if r.ok:
        return None
    exc = r.exception or {}
    if r.status == "exception":
        return {"type": exc.get("name", ""), "message": exc.get("value", ""), "traceback": exc.get("traceback", "")}
    if r.status == "exit_nonzero":
        return {"type": "NonZeroExit", "message": "exited with status %s" % r.exit_code, "traceback": r.stderr}
    # A limit or the sandbox ended it (a timeout's KeyboardInterrupt is how,
    # not why): the type says why, the traceback where.
    kind, message = _STATUS_ERRORS.get(r.status, ("SandboxError", "status %s" % r.status))
    if r.raw.get("error"):
        message += ": " + r.raw["error"]
    return {"type": kind, "message": message, "traceback": exc.get("traceback") or r.stderr}


def error_text(r: Result, stderr: str) -> str:
    """What to add to stderr so that it tells a model what went wrong: the
    traceback when stderr lacks it, and for a limit or the sandbox ending
    the run, a last line naming it (TimeoutError: ...)."""
    err = error_info(r)
    if err is None:
        return ""
    out = ""
    tb = err["traceback"]
    if tb and tb not in stderr:
        out += tb if tb.endswith("\n") else tb + "\n"
    if r.status not in ("exception", "exit_nonzero"):  # an exit status speaks for itself
        out += "%s: %s\n" % (err["type"], err["message"])
    return out


class SecureExecutor:
    """Runs Python code in a fresh nsbox sandbox per call (smolagents style).

    allowed_imports: the modules the code may import (None: any); a module
    outside the list raises ImportError inside the sandbox, naming the list.
    execution_timeout: seconds. client, rootfs, limits (extra nsbox limits,
    e.g. {"memory_bytes": 1 << 30}) and profile pass through to Client.run.
    """

    def __init__(self, allowed_imports: Optional[Iterable[str]] = None, execution_timeout: float = 5,
                 client: Optional[Client] = None, rootfs: Optional[str] = None,
                 limits: Optional[Mapping[str, Any]] = None, profile: Optional[str] = None):
        if (isinstance(execution_timeout, bool) or not isinstance(execution_timeout, (int, float))
                or execution_timeout <= 0):
            raise ValueError("execution_timeout must be a positive number of seconds, not %r" % (execution_timeout,))
        if isinstance(allowed_imports, str):
            raise TypeError("allowed_imports: give a list of module names, e.g. [%r]" % allowed_imports)
        self.allowed_imports = list(allowed_imports) if allowed_imports is not None else None
        self.execution_timeout = execution_timeout
        self.client = client or Client()
        self.rootfs = rootfs
        self.limits = dict(limits or {})
        self.profile = profile

    def run(self, code: str, files: Optional[Files] = None) -> Dict[str, Any]:
        """Runs code and returns a dict:

        status: "success", "error" or "timeout"; output: what the code
        printed, then the value of its last expression if any; stdout,
        stderr; result: repr of the last expression's value (or None);
        error: None, or {type, message, traceback}; execution_time_ms;
        nsbox_status: the daemon's own status (ok, exception, oom, ...).
        """
        _check_code(code)
        limits = dict(self.limits)
        limits["timeout_ms"] = int(self.execution_timeout * 1000)
        r = self.client.run(code=code, files=files, rootfs=self.rootfs, profile=self.profile, limits=limits,
                            allowed_imports=self.allowed_imports)
        status = "success" if r.ok else "timeout" if r.status == "timeout" else "error"
        output = r.stdout
        if r.value is not None:
            output += r.value if not output or output.endswith("\n") else "\n" + r.value
        return {"status": status, "output": output, "stdout": r.stdout, "stderr": r.stderr, "result": r.value,
                "error": error_info(r), "execution_time_ms": r.wall_ms, "nsbox_status": r.status}


class CodeExecutionTool:
    """A tool around an executor (smolagents style): name, description,
    inputs and output_type describe it to a model; execute_code (or calling
    the tool) runs a snippet and returns the executor's dict plus
    success: bool."""

    name = "python_code_execution"
    description = ("Runs a Python code snippet in a fresh, isolated sandbox (no network, limited time and memory) "
                   "and returns its output, the value of its last expression and any error.")
    inputs = {"code_snippet": {"type": "string", "description": "Python source code to run"}}
    output_type = "object"

    def __init__(self, executor: Optional[SecureExecutor] = None):
        self.executor = executor or SecureExecutor()

    def execute_code(self, code_snippet: str) -> Dict[str, Any]:
        _check_code(code_snippet, "code_snippet")
        out = self.executor.run(code_snippet)
        out["success"] = out["status"] == "success"
        return out

    __call__ = execute_code
    forward = execute_code


class ResourceLimits:
    """Limits in the agent-framework document's terms, mapped onto nsbox's.

    security_level picks a daemon profile ("strict", "standard",
    "permissive"; GET /v1/info lists their limits); each field given here
    overrides the profile's: max_memory_mb -> memory_bytes, max_cpu_percent
    -> cpus (percent of one core: 50 is half a CPU, 200 two), 
    max_execution_time_seconds -> timeout_ms, max_file_size_mb -> disk_bytes
    (the size of /workspace, which bounds any file written there).
    """

    def __init__(self, max_memory_mb: Optional[float] = None, max_cpu_percent: Optional[float] = None,
                 max_execution_time_seconds: Optional[float] = None, max_file_size_mb: Optional[float] = None,
                 security_level: str = "standard"):
        if security_level not in SECURITY_LEVELS:
            raise ValueError("security_level %r: use one of %s" % (security_level, ", ".join(SECURITY_LEVELS)))
        for name, v in (("max_memory_mb", max_memory_mb), ("max_cpu_percent", max_cpu_percent),
                        ("max_execution_time_seconds", max_execution_time_seconds),
                        ("max_file_size_mb", max_file_size_mb)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0):
                raise ValueError("%s must be a positive number, not %r" % (name, v))
        self.max_memory_mb = max_memory_mb
        self.max_cpu_percent = max_cpu_percent
        self.max_execution_time_seconds = max_execution_time_seconds
        self.max_file_size_mb = max_file_size_mb
        self.security_level = security_level

    def __repr__(self) -> str:
        return ("ResourceLimits(max_memory_mb=%r, max_cpu_percent=%r, max_execution_time_seconds=%r, "
                "max_file_size_mb=%r, security_level=%r)" % (self.max_memory_mb, self.max_cpu_percent,
                                                             self.max_execution_time_seconds,
                                                             self.max_file_size_mb, self.security_level))

    @property
    def profile(self) -> str:
        """The daemon profile this security level selects."""
        return self.security_level

    def to_nsbox(self) -> Dict[str, Any]:
        """The nsbox limits these fields set (the profile fills the rest)."""
        out: Dict[str, Any] = {}
        if self.max_memory_mb is not None:
            out["memory_bytes"] = int(self.max_memory_mb * (1 << 20))
        if self.max_cpu_percent is not None:
            out["cpus"] = self.max_cpu_percent / 100.0
        if self.max_execution_time_seconds is not None:
            out["timeout_ms"] = int(self.max_execution_time_seconds * 1000)
        if self.max_file_size_mb is not None:
            out["disk_bytes"] = int(self.max_file_size_mb * (1 << 20))
        return out


class ExecutionResult:
    """What CodeExecutor.execute returns. stderr reads as a process's
    would: what the code wrote there, then the traceback of an exception
    and, when a limit or the sandbox stopped it, a last line naming that
    (TimeoutError: ...); raw.stderr is the stream alone."""

    def __init__(self, r: Result):
        self.raw = r
        self.status: str = r.status
        self.success: bool = r.ok
        self.stdout: str = r.stdout
        self.stderr: str = r.stderr + error_text(r, r.stderr)
        self.exit_code: Optional[int] = r.exit_code
        self.value: Optional[str] = r.value
        self.execution_time_ms: int = r.wall_ms or 0
        self.timeout: bool = r.status == "timeout"
        self.memory_exceeded: bool = r.status == "oom"
        self.error: Optional[Dict[str, str]] = error_info(r)
        self.files = r.files or []

    def __repr__(self) -> str:
        return "ExecutionResult(status=%r, exit_code=%r, execution_time_ms=%r)" % (
            self.status, self.exit_code, self.execution_time_ms)


class CodeExecutor:
    """The orchestration document's executor: each execute() is a fresh
    sandbox with these limits. language: "python" or "bash"; timeout:
    seconds; max_memory_mb; max_cpu_percent (of one core). limits, a
    ResourceLimits, replaces the three and adds its security level."""

    LANGUAGES = ("python", "bash")

    def __init__(self, language: str = "python", timeout: float = 30, max_memory_mb: float = 512,
                 max_cpu_percent: float = 50, client: Optional[Client] = None, rootfs: Optional[str] = None,
                 limits: Optional[ResourceLimits] = None, allowed_imports: Optional[Iterable[str]] = None):
        if language not in self.LANGUAGES:
            raise ValueError("language %r: use one of %s" % (language, ", ".join(self.LANGUAGES)))
        if limits is None:
            limits = ResourceLimits(max_memory_mb=max_memory_mb, max_cpu_percent=max_cpu_percent,
                                    max_execution_time_seconds=timeout)
        elif not isinstance(limits, ResourceLimits):
            raise TypeError("limits: give an nsbox.ResourceLimits, not %s" % type(limits).__name__)
        self.language = language
        self.limits = limits
        self.client = client or Client()
        self.rootfs = rootfs
        self.allowed_imports = list(allowed_imports) if allowed_imports is not None else None

    def execute(self, code: str, files: Optional[Files] = None) -> ExecutionResult:
        """Runs code in a fresh sandbox. A limit above the daemon's maxima
        raises nsbox.InvalidArgument (the daemon's message names it)."""
        _check_code(code)
        r = self.client.run(code=code, language=self.language, files=files, rootfs=self.rootfs,
                            profile=self.limits.profile, limits=self.limits.to_nsbox(),
                            allowed_imports=self.allowed_imports)
        return ExecutionResult(r)
