"""Session-backed tools: one nsbox session (a persistent interpreter and
/workspace) per conversation.

- CodeExecutionSession: the code-execution tool shape of the Anthropic-style
  implementation: execute(code) -> {stdout, stderr, return_code, files},
  files in and out, a session that lives an hour by default, and the tool's
  definition (TOOL) to register with a model.
- PythonExecTool: the two-agent split of the code-interpreter cookbook: the
  host side uploads files (upload_file), the code side only executes
  (run(code) -> text for the model).
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Union

from ._wire import Result
from .client import Client, Session
from .errors import NotFound, NsboxError, SessionDead
from .executors import error_text

__all__ = ["CodeExecutionSession", "PythonExecTool", "HOUR_MS"]

HOUR_MS = 3_600_000

# A return code per status, as a shell would show it: 124 is timeout(1)'s,
# 137 a SIGKILL's (the OOM killer, a kill).
_RETURN_CODES = {"ok": 0, "exception": 1, "timeout": 124, "oom": 137, "killed": 137, "crashed": 137,
                 "output_limit": 1, "cancelled": 130, "error": 1}


class _SessionHolder:
    """Starts the session at first use and again when it has ended (its
    lifetime, an OOM that killed it), saying so in the next answer."""

    def __init__(self, client: Optional[Client], rootfs: Optional[str], lifetime_ms: int,
                 limits: Optional[Mapping[str, Any]], allowed_imports: Optional[Iterable[str]],
                 env: Optional[Mapping[str, str]]):
        self.client = client or Client()
        self.rootfs = rootfs
        self.lifetime_ms = lifetime_ms
        self.limits = dict(limits) if limits else None
        self.allowed_imports = list(allowed_imports) if allowed_imports is not None else None
        self.env = dict(env) if env else None
        self._session: Optional[Session] = None
        self._restarted = ""

    @property
    def session(self) -> Session:
        if self._session is None:
            # The idle timeout follows the lifetime: a conversation may pause
            # for as long as it lives.
            self._session = self.client.session(rootfs=self.rootfs, limits=self.limits, env=self.env,
                                                lifetime_ms=self.lifetime_ms, idle_timeout_ms=self.lifetime_ms,
                                                allowed_imports=self.allowed_imports)
        return self._session

    def call(self, fn: Any) -> Any:
        s = self.session
        try:
            return fn(s)
        except (SessionDead, NotFound) as e:
            if isinstance(e, NotFound) and _alive(s):
                raise  # a missing file of a live session: the session stays
            self._session = None
            _discard(s)
            self._restarted = ("nsbox: the sandbox session had ended (%s); a new one was started: variables "
                               "and files of earlier cells are gone\n" % e.message)
            return fn(self.session)

    def take_notice(self) -> str:
        notice, self._restarted = self._restarted, ""
        return notice

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None


def _alive(s: Session) -> bool:
    """Whether the daemon still has s, not dead: a 404 of a file operation
    is then the file's, not the session's."""
    try:
        return s.info().get("state") != "dead"
    except NotFound:
        return False


def _discard(s: Session) -> None:
    """Deletes an ended session's record, which the daemon otherwise keeps
    until its idle timeout; one already gone is fine."""
    try:
        s.close()
    except NsboxError:
        pass


class CodeExecutionSession:
    """A code-execution tool for one conversation: every execute() runs in
    the same Python session, so variables, imports and /workspace files
    persist; the session ends after lifetime_ms (an hour by default) or at
    close(). Use it as a context manager.

    client, rootfs, limits (per-session nsbox limits; timeout_ms is each
    execution's), allowed_imports and env pass through to Client.session.
    """

    TOOL: Dict[str, Any] = {
        "name": "code_execution",
        "description": ("Runs Python code in a persistent sandboxed session (variables, imports and files in the "
                        "working directory persist between calls; no network). Returns stdout, stderr, "
                        "return_code (0 on success) and the files the code created or changed."),
        "input_schema": {"type": "object", "properties": {"code": {"type": "string", "description": "Python code to run"}},
                         "required": ["code"]},
    }

    def __init__(self, client: Optional[Client] = None, rootfs: Optional[str] = None, lifetime_ms: int = HOUR_MS,
                 limits: Optional[Mapping[str, Any]] = None, allowed_imports: Optional[Iterable[str]] = None,
                 env: Optional[Mapping[str, str]] = None):
        self._h = _SessionHolder(client, rootfs, lifetime_ms, limits, allowed_imports, env)

    def __enter__(self) -> CodeExecutionSession:
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    @property
    def session(self) -> Session:
        """The nsbox session (started at first use)."""
        return self._h.session

    def execute(self, code: str, timeout_ms: Optional[int] = None) -> Dict[str, Any]:
        """Runs code; returns {stdout, stderr, return_code, files, value}.
        return_code is 0 on success, 1 for an exception (its traceback ends
        stderr), 124 for a timeout, 137 when the sandbox was killed (out
        of memory). files: [{path, size, ...}] created or changed."""
        if not isinstance(code, str):
            raise TypeError("code must be a str of Python source code, not %s" % type(code).__name__)
        r: Result = self._h.call(lambda s: s.exec(code, timeout_ms=timeout_ms))
        stderr = self._h.take_notice() + r.stderr
        stderr += error_text(r, stderr)
        return {"stdout": r.stdout, "stderr": stderr, "return_code": _RETURN_CODES.get(r.status, 1),
                "files": [f for f in r.files or [] if not f.get("dir")], "value": r.value}

    def handle(self, tool_input: Mapping[str, Any]) -> Dict[str, Any]:
        """Runs a tool_use block's input ({"code": ...}) as TOOL describes."""
        if not isinstance(tool_input, Mapping) or "code" not in tool_input:
            raise ValueError("tool input must be an object with a \"code\" string, as TOOL's input_schema says")
        return self.execute(tool_input["code"])

    def upload(self, path: str, data: Union[bytes, str, Any]) -> None:
        """Writes data to path under /workspace."""
        self._h.call(lambda s: s.upload(path, data))

    def download(self, path: str) -> bytes:
        """Reads a file of /workspace."""
        return self._h.call(lambda s: s.download(path))

    def files(self) -> List[Dict[str, Any]]:
        """Lists /workspace."""
        return self._h.call(lambda s: s.files())

    def close(self) -> None:
        """Ends the session (idempotent)."""
        self._h.close()


class PythonExecTool:
    """The code side of a two-agent code interpreter: run(code) executes in
    one persistent session and returns text for the model (output, the last
    expression's value, or the error); upload_file is the host side's way
    to put data where the code can read it. get_tool_definition() is the
    OpenAI function-calling definition of run."""

    name = "execute_python_code"
    description = ("Executes Python code in a persistent sandbox whose working directory holds the uploaded files; "
                   "returns what the code printed, or the error.")

    def __init__(self, client: Optional[Client] = None, rootfs: Optional[str] = None, timeout_ms: int = 60_000,
                 lifetime_ms: int = HOUR_MS, limits: Optional[Mapping[str, Any]] = None,
                 allowed_imports: Optional[Iterable[str]] = None):
        self.timeout_ms = timeout_ms
        self._h = _SessionHolder(client, rootfs, lifetime_ms, limits, allowed_imports, None)

    def __enter__(self) -> PythonExecTool:
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    def get_tool_definition(self) -> Dict[str, Any]:
        return {"type": "function", "function": {
            "name": self.name, "description": self.description,
            "parameters": {"type": "object", "properties": {"python_code": {
                "type": "string", "description": "The Python code to execute"}}, "required": ["python_code"]}}}

    def upload_file(self, source: Union[str, bytes, os.PathLike], name: Optional[str] = None) -> str:
        """Host side: copies a local file (a path) or bytes into the
        session's /workspace as name (default: the file's base name) and
        returns the path the code opens it by."""
        if isinstance(source, (bytes, bytearray)):
            if not name:
                raise ValueError("upload_file: give a name for bytes")
            data = bytes(source)
        else:
            with open(source, "rb") as f:
                data = f.read()
            name = name or os.path.basename(os.fspath(source))
        self._h.call(lambda s: s.upload(name, data))
        return name

    def run(self, python_code: str) -> str:
        """Code side: executes and returns the output as text; an error
        comes back as text too (the traceback), for the model to read."""
        if not isinstance(python_code, str):
            raise TypeError("python_code must be a str of Python source code, not %s" % type(python_code).__name__)
        r: Result = self._h.call(lambda s: s.exec(python_code, timeout_ms=self.timeout_ms))
        out = self._h.take_notice() + r.stdout
        if r.value is not None:
            out += r.value + "\n"
        if not r.ok:
            out += r.stderr + error_text(r, r.stderr)
        return out

    def close(self) -> None:
        self._h.close()
