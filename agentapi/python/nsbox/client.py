"""A dependency-free Python client for the nsbox daemon.

nsbox runs untrusted code in fresh Linux sandboxes. This module speaks the
daemon's HTTP/1.1 + JSON API (docs/API.md) over its Unix socket with the
standard library only, so it can be copied next to any agent::

    from nsbox import Client

    nsbox = Client()                       # $NSBOX_SOCKET or /run/nsbox/nsbox.sock
    r = nsbox.run(code="print(6 * 7)")
    print(r.stdout, r.status)              # "42\\n" "ok"

    with nsbox.session(rootfs="default") as s:
        s.upload("data.csv", b"a,b\\n1,2\\n")
        s.exec("import pandas as pd; df = pd.read_csv('data.csv')")
        print(s.exec("df.a.sum()").value)  # "1"
        png = s.exec("df.plot()").figures[0]

Daemon errors raise NsboxError subclasses (InvalidArgument, NotFound,
SessionDead, ResourceExhausted, ...); a run that fails on its own (an
exception, a timeout, OOM) is a Result with that status, not an exception.
"""

import base64
import http.client
import json
import os
import socket
import urllib.parse

from .errors import (_BY_STATUS, DaemonUnreachable, InvalidArgument, NotFound,  # noqa: F401
                     NsboxError)

__all__ = ["Client", "Session", "Result", "DEFAULT_SOCKET"]

DEFAULT_SOCKET = "/run/nsbox/nsbox.sock"
API = "/v1"
NDJSON = "application/x-ndjson"


class _UnixHTTPConnection(http.client.HTTPConnection):
    """HTTPConnection over a Unix socket."""

    def __init__(self, path, timeout=None):
        super().__init__("nsbox", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if self.timeout is not None:
                s.settimeout(self.timeout)
            s.connect(self._path)
        except OSError:
            s.close()
            raise
        self.sock = s


class Result:
    """The result of a run or an exec (docs/API.md, "Result").

    Every field of the JSON is an attribute (missing ones are None):
    status, exit_code, stdout, stderr, value, exception ({name, value,
    traceback}), files, wall_ms, execution_count, ... .figures holds the
    figures as PNG bytes; .raw the JSON object.
    """

    def __init__(self, raw):
        self.raw = raw

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self.raw.get(name)

    @property
    def ok(self):
        """True when the code ran to its end (status "ok")."""
        return self.raw.get("status") == "ok"

    @property
    def figures(self):
        """The matplotlib figures, each as PNG bytes."""
        return [base64.b64decode(f["data_base64"]) for f in self.raw.get("figures") or []]

    def file(self, path):
        """The content (bytes) of a returned file (RunRequest return_files)."""
        for f in self.raw.get("files") or []:
            if f["path"] == path and "content_base64" in f:
                return base64.b64decode(f["content_base64"])
        raise KeyError(path)

    def __repr__(self):
        return "Result(status=%r, exit_code=%r, value=%r)" % (self.status, self.exit_code, self.value)


def _files(files):
    """Turns {path: str|bytes} (or a list of API file objects) into the API's list."""
    if files is None:
        return None
    if isinstance(files, dict):
        out = []
        for path, content in files.items():
            if isinstance(content, bytes):
                out.append({"path": path, "content_base64": base64.b64encode(content).decode("ascii")})
            else:
                out.append({"path": path, "text": content})
        return out
    return list(files)


def _file_url(session_id, path):
    # Checked here as the daemon would: a URL with ".." or "//" would be
    # cleaned (and redirected) before the daemon saw the path.
    if not path or path.startswith("/") or any(e in ("", ".", "..") for e in path.split("/")) or "\x00" in path:
        raise InvalidArgument("invalid_argument",
                              "path %r: give a clean path relative to /workspace (no leading /, no . or .. elements)" % path, 400)
    return "%s/sessions/%s/files/%s" % (API, urllib.parse.quote(session_id, safe=""), urllib.parse.quote(path, safe="/"))


class Client:
    """A client of one nsbox daemon. socket_path defaults to $NSBOX_SOCKET,
    then /run/nsbox/nsbox.sock. timeout (seconds, None: none) bounds each
    socket operation; runs are bounded by their own limits."""

    def __init__(self, socket_path=None, timeout=None):
        self.socket_path = socket_path or os.environ.get("NSBOX_SOCKET") or DEFAULT_SOCKET
        self.timeout = timeout

    # --- transport

    def _open(self, method, path, body=None, headers=None):
        """Sends a request and returns (conn, response) of a 2xx answer."""
        headers = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode("utf-8")
            headers.setdefault("Content-Type", "application/json")
        conn = _UnixHTTPConnection(self.socket_path, self.timeout)
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise DaemonUnreachable("unreachable", "nsbox daemon at %s: %s (is `nsbox daemon` running?)" % (self.socket_path, e)) from e
        if resp.status // 100 != 2:
            data = resp.read()
            conn.close()
            raise self._error(resp, data)
        return conn, resp

    @staticmethod
    def _error(resp, data):
        code, message = "internal", "HTTP %d: %s" % (resp.status, data.decode("utf-8", "replace").strip())
        try:
            err = json.loads(data)["error"]
            code, message = err["code"], err["message"]
        except (ValueError, KeyError, TypeError):
            pass
        retry = resp.getheader("Retry-After")
        retry = int(retry) if retry and retry.isdigit() else None
        return _BY_STATUS.get(resp.status, NsboxError)(code, message, resp.status, retry)

    def _call(self, method, path, body=None, headers=None):
        """Sends a request and returns the answer's body (bytes)."""
        conn, resp = self._open(method, path, body, headers)
        try:
            return resp.read()
        finally:
            conn.close()

    def _json(self, method, path, body=None):
        data = self._call(method, path, body)
        return json.loads(data) if data else None

    def _stream(self, path, body, on_stdout, on_stderr):
        """POSTs body asking for NDJSON and calls the callbacks per chunk."""
        conn, resp = self._open("POST", path, body, {"Accept": NDJSON})
        try:
            while True:
                line = resp.readline()
                if not line:
                    raise NsboxError("internal", "the stream ended before its result")
                if not line.strip():
                    continue
                ev = json.loads(line)
                kind = ev.get("type")
                if kind in ("stdout", "stderr"):
                    cb = on_stdout if kind == "stdout" else on_stderr
                    if cb is not None:
                        data = ev.get("data")
                        if data is None and "data_base64" in ev:
                            data = base64.b64decode(ev["data_base64"]).decode("utf-8", "replace")
                        cb(data or "")
                elif kind == "result":
                    return Result(ev["result"])
                elif kind == "error":
                    err = ev.get("error") or {}
                    raise NsboxError(err.get("code", "internal"), err.get("message", "stream error"), resp.status)
        finally:
            conn.close()

    # --- API

    def health(self):
        """GET /v1/health: {"status": "ok", "api_version": "v1"}."""
        return self._json("GET", API + "/health")

    def info(self):
        """GET /v1/info: version, rootfs list, default and maximum limits."""
        return self._json("GET", API + "/info")

    def run(self, code=None, argv=None, language="python", files=None, limits=None, stdin=None, env=None,
            rootfs=None, profile=None, return_files=None, on_stdout=None, on_stderr=None):
        """Runs code (language "python" or "bash") or argv in a fresh sandbox
        and returns its Result.

        files: {path: str|bytes} written into /workspace first. limits:
        {"timeout_ms", "memory_bytes", "pids", "cpus", "disk_bytes",
        "output_bytes"}. return_files: glob patterns of files to return
        (Result.file(path)). on_stdout/on_stderr: called with each chunk of
        output as it is produced (the run streams).
        """
        if (code is None) == (argv is None):
            raise ValueError("give exactly one of code or argv")
        req = {"argv": list(argv)} if argv is not None else {"language": language, "code": code}
        for key, val in (("files", _files(files)), ("limits", limits), ("stdin", stdin), ("env", env),
                         ("rootfs", rootfs), ("profile", profile), ("return_files", return_files)):
            if val is not None:
                req[key] = val
        if on_stdout is not None or on_stderr is not None:
            return self._stream(API + "/runs", req, on_stdout, on_stderr)
        return Result(self._json("POST", API + "/runs", req))

    def session(self, rootfs=None, limits=None, idle_timeout_ms=None, env=None, files=None):
        """Starts a session (a persistent Python interpreter and /workspace)
        and returns it once ready. Use it as a context manager to close it."""
        req = {}
        for key, val in (("rootfs", rootfs), ("limits", limits), ("idle_timeout_ms", idle_timeout_ms),
                         ("env", env), ("files", _files(files))):
            if val is not None:
                req[key] = val
        info = self._json("POST", API + "/sessions", req)
        return Session(self, info["id"], info)

    def sessions(self):
        """Lists the daemon's sessions (dicts, as GET /v1/sessions)."""
        return self._json("GET", API + "/sessions")["sessions"]


class Session:
    """A live session: exec code in one interpreter, move files in and out
    of its /workspace. Closing it (close() or leaving a with block) ends it."""

    def __init__(self, client, session_id, info=None):
        self.client = client
        self.id = session_id
        self.created = info
        self._path = "%s/sessions/%s" % (API, urllib.parse.quote(session_id, safe=""))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return "Session(%r)" % self.id

    def info(self):
        """The session's state ("idle", "busy", "dead" with dead_reason), limits, exec count."""
        return self.client._json("GET", self._path)

    def exec(self, code, timeout_ms=None, on_stdout=None, on_stderr=None):
        """Runs code in the session and returns its Result: value (repr of
        the last expression), exception, figures, files changed. State
        persists between execs. on_stdout/on_stderr stream the output."""
        req = {"code": code}
        if timeout_ms:
            req["timeout_ms"] = int(timeout_ms)
        if on_stdout is not None or on_stderr is not None:
            return self.client._stream(self._path + "/exec", req, on_stdout, on_stderr)
        return Result(self.client._json("POST", self._path + "/exec", req))

    def upload(self, path, data):
        """Writes data (bytes, str or a binary file object) to path under
        /workspace, creating parent directories."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        elif not isinstance(data, bytes):
            data = data.read()
        self.client._call("PUT", _file_url(self.id, path), data, {"Content-Type": "application/octet-stream"})

    def download(self, path):
        """Reads a file of /workspace (bytes)."""
        return self.client._call("GET", _file_url(self.id, path))

    def delete_file(self, path):
        """Removes a file of /workspace."""
        self.client._call("DELETE", _file_url(self.id, path))

    def files(self):
        """Lists /workspace: dicts with path, size, mode, mtime, sha256, mime, dir, symlink."""
        return self.client._json("GET", self._path + "/files")["files"]

    def close(self):
        """Ends the session (idempotent)."""
        try:
            self.client._call("DELETE", self._path)
        except NotFound:
            pass
