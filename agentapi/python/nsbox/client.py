"""The synchronous client of the nsbox daemon.

nsbox runs untrusted code in fresh Linux sandboxes. This module speaks the
daemon's HTTP/1.1 + JSON API (docs/API.md) over its Unix socket with the
standard library only::

    import nsbox

    client = nsbox.Client()                # $NSBOX_SOCKET or /run/nsbox/nsbox.sock
    r = client.run(code="print(6 * 7)")
    print(r.stdout, r.status)              # "42\\n" "ok"

    with client.session(rootfs="default") as s:
        s.upload("data.csv", b"a,b\\n1,2\\n")
        s.exec("import pandas as pd; df = pd.read_csv('data.csv')")
        print(s.exec("df.a.sum()").value)  # "1"

Daemon errors raise NsboxError subclasses (InvalidArgument, NotFound,
SessionDead, ResourceExhausted, ...); a run that fails on its own (an
exception, a timeout, OOM) is a Result with that status, not an exception.
429 and 503 answers are retried (see Retry).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from . import _wire, terminal
from ._wire import API, DEFAULT_SOCKET, NDJSON, Batch, Files, Result, Retry
from .errors import DaemonUnreachable, NotFound, RequestTimeout
from .ports import Port
from .terminal import Terminal

__all__ = ["Client", "Session", "Result", "Retry", "DEFAULT_SOCKET", "Terminal", "Port"]

Output = Optional[Callable[[str], Any]]


class _UnixHTTPConnection(http.client.HTTPConnection):
    """HTTPConnection over a Unix socket; connect_timeout bounds the connect,
    timeout every read and write after it."""

    def __init__(self, path: str, timeout: Optional[float], connect_timeout: Optional[float]):
        super().__init__("nsbox", timeout=timeout)
        self._path = path
        self._connect_timeout = connect_timeout

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self._connect_timeout)
            s.connect(self._path)
            s.settimeout(self.timeout)
        except OSError:
            s.close()
            raise
        self.sock = s


class Client(_wire.ClientBase):
    """A client of one nsbox daemon.

    socket_path: default $NSBOX_SOCKET, then /run/nsbox/nsbox.sock.
    timeout: seconds for any request that is not a run or an exec (and the
    margin added to a run's own time limit for its deadline); None: no limit.
    connect_timeout: seconds to connect. retries: an nsbox.Retry, or a number
    of retries of 429/503 answers (0: none). queue_timeout: seconds a run may
    wait in the daemon's queue for a run slot before it starts (its own
    deadline counts from its start); None: as long as the daemon keeps it.
    """

    # --- transport

    def _connection(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        """A connection to the daemon (not yet connected); timeout bounds each read and write."""
        return _UnixHTTPConnection(self.socket_path, timeout, self.connect_timeout)

    def _open(self, method: str, path: str, body: Any = None, headers: Optional[Dict[str, str]] = None,
              deadline: Optional[float] = -1.0, queued: bool = False,
              ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Sends a request, retrying 429 and 503, and returns the connection
        and response of a 2xx answer. deadline: the read timeout (-1: the
        client's). queued: a streamed run, whose answer starts only once it
        has a run slot: the answer's head gets the queue's deadline, the
        rest deadline."""
        headers = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode("utf-8")
            headers.setdefault("Content-Type", "application/json")
        timeout = self.timeout if deadline == -1.0 else deadline
        head = self._queue_deadline() if queued else timeout
        waited, attempt = 0.0, 0
        while True:
            conn = _UnixHTTPConnection(self.socket_path, head, self.connect_timeout)
            try:
                conn.connect()
            except OSError as e:  # refused, no such socket, connect_timeout
                conn.close()
                raise DaemonUnreachable("unreachable", _wire.unreachable_message(self.socket_path, e)) from e
            try:
                try:
                    conn.request(method, path, body=body, headers=headers)
                except (BrokenPipeError, ConnectionResetError):
                    # The daemon answers a body over its cap (413) before
                    # reading it, and closes: the answer waits in the socket.
                    # No answer there: getresponse says the daemon is gone.
                    pass
                resp = conn.getresponse()
                if conn.sock is not None:
                    conn.sock.settimeout(timeout)
            except socket.timeout as e:
                conn.close()
                if queued:
                    raise RequestTimeout("timeout", self._queue_message(path, head)) from e
                raise RequestTimeout("timeout", "%s %s: no answer from the nsbox daemon at %s within %ss" % (
                    method, path, self.socket_path, timeout)) from e
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise DaemonUnreachable("unreachable", _wire.unreachable_message(self.socket_path, e)) from e
            if resp.status // 100 == 2:
                return conn, resp
            try:
                err = _wire.error_from(resp.status, resp.read(), resp.getheader("Retry-After"))
            finally:
                conn.close()
            attempt += 1
            delay = self.retry.delay(attempt, err, waited)
            if delay is None:
                raise err
            time.sleep(delay)
            waited += delay

    def _call(self, method: str, path: str, body: Any = None, headers: Optional[Dict[str, str]] = None,
              deadline: Optional[float] = -1.0) -> bytes:
        """Sends a request and returns the answer's body."""
        conn, resp = self._open(method, path, body, headers, deadline)
        try:
            return resp.read()
        except socket.timeout as e:
            raise RequestTimeout("timeout", "%s %s: the answer stalled" % (method, path)) from e
        except (OSError, http.client.HTTPException) as e:
            raise _wire.cut_off(method, path) from e
        finally:
            conn.close()

    def _json(self, method: str, path: str, body: Any = None,
              deadline: Optional[float] = -1.0) -> Dict[str, Any]:
        data = self._call(method, path, body, deadline=deadline)
        return _wire.json_object(data, "%s %s" % (method, path))

    def _ndjson(self, path: str, body: Dict[str, Any], deadline: Optional[float], queued: bool = False,
                waiting: str = "event") -> Iterator[bytes]:
        """POSTs body asking for NDJSON and yields the answer's lines; a
        stalled or cut-off answer raises. A 429/503 comes before the answer
        starts, so only that is retried."""
        conn, resp = self._open("POST", path, body, {"Accept": NDJSON}, deadline, queued)
        try:
            while True:
                try:
                    line = resp.readline()
                except socket.timeout as e:
                    raise RequestTimeout("timeout", "POST %s: no %s within %ss" % (path, waiting, deadline)) from e
                except (OSError, http.client.HTTPException) as e:
                    raise _wire.cut_off("POST", path) from e
                if not line:
                    raise _wire.cut_off("POST", path)
                yield line
        finally:
            conn.close()

    def _stream(self, path: str, body: Dict[str, Any], on_stdout: Output, on_stderr: Output,
                deadline: Optional[float], queued: bool = False) -> Result:
        """POSTs body asking for NDJSON and calls the callbacks per chunk."""
        with contextlib.closing(self._ndjson(path, body, deadline, queued)) as lines:
            for line in lines:
                kind, val = _wire.stream_event(line, "POST " + path)
                if isinstance(val, Result):
                    return val
                cb = _wire.callback(kind, on_stdout, on_stderr)
                if cb is not None and val is not None:
                    cb(val)
        raise _wire.cut_off("POST", path)  # not reached: _ndjson raises at the end

    def _run_deadline(self, req: Dict[str, Any]) -> Optional[float]:
        if self._needs_timeouts(req):
            self._learn_timeouts(self.info())
        return self._run_deadline_of(req)

    # --- API

    def health(self) -> Dict[str, Any]:
        """GET /v1/health: {"status": "ok", "api_version": "v1"}."""
        return self._json("GET", API + "/health")

    def info(self) -> Dict[str, Any]:
        """GET /v1/info: version, rootfs list, default and maximum limits, profiles."""
        return self._json("GET", API + "/info")

    def run(self, code: Optional[str] = None, argv: Optional[Sequence[str]] = None, language: str = "python",
            files: Optional[Files] = None, limits: Optional[Mapping[str, Any]] = None, stdin: Optional[str] = None,
            env: Optional[Mapping[str, str]] = None, rootfs: Optional[str] = None, profile: Optional[str] = None,
            return_files: Optional[Sequence[str]] = None, allowed_imports: Optional[Iterable[str]] = None,
            network: Any = None, on_stdout: Output = None, on_stderr: Output = None,
            volumes: Any = None, datasets: Optional[Sequence[str]] = None, init: bool = False) -> Result:
        """Runs code (language "python" or "bash") or argv in a fresh sandbox
        and returns its Result.

        files: {path: str|bytes} written into /workspace first. limits: some
        of timeout_ms, memory_bytes, pids, cpus, disk_bytes, output_bytes.
        profile: a security profile (info()["profiles"]). return_files: glob
        patterns of files to return (Result.file(path)). allowed_imports: the
        modules Python code may import (None: any; a policy aid, not a
        boundary). network: hosts the run may reach through the daemon's
        egress proxy (["pypi.org"]), or {"allow": [...], "secrets": [...]};
        the result's .network has the audit. on_stdout/on_stderr: called with each chunk of output as
        it is produced (the run streams). volumes: named volumes to mount
        ("data" at /mnt/data, "data:/mnt/in:ro", or {"name", "path",
        "read_only"}); datasets: the operator's read-only datasets by name
        (at /mnt/NAME). init: pid 1 is a minimal init, as with docker run
        --init, and the command its child: a signal it sends itself ends it
        (exit_code 128+N), orphans are reaped; without it the command is
        pid 1 and ignores signals it has no handler for (docs/API.md).
        """
        req = _wire.run_body(code, argv, language, files, limits, stdin, env, rootfs, profile, return_files,
                             allowed_imports, network, volumes, datasets, init)
        # Always streamed: the answer starts when the run has a run slot, so
        # the time it queued and its own time get separate deadlines.
        return self._stream(API + "/runs", req, on_stdout, on_stderr, self._run_deadline(req), queued=True)

    def run_batch(self, runs: Iterable[Mapping[str, Any]], concurrency: Optional[int] = None,
                  on_item: Optional[Callable[[int, Any], None]] = None) -> "Batch":
        """Runs many independent runs (each a dict of run() arguments:
        code, argv, language, files, limits, ...) through one request, at
        most concurrency at once (default: the daemon's max_concurrent).
        The daemon waits for run slots instead of refusing runs when it is
        busy. on_item(index, Result or NsboxError) is called as each run
        finishes; the returned Batch has every answer in request order
        (batch.results) and the daemon's counts (batch.summary).
        """
        body = _wire.batch_body(runs, concurrency)
        if any(self._needs_timeouts(r) for r in body["runs"]):
            self._learn_timeouts(self.info())
        answer = _wire.BatchAnswer(len(body["runs"]))
        path = API + "/runs:batch"
        with contextlib.closing(self._ndjson(path, body, self._batch_deadline_of(body["runs"]), waiting="run's end")) as lines:
            for line in lines:
                batch, item = answer.take(line, "POST " + path)
                if batch is not None:
                    return batch
                if item is not None and on_item is not None:
                    on_item(*item)
        raise _wire.cut_off("POST", path)  # not reached: _ndjson raises at the end

    def session(self, rootfs: Optional[str] = None, limits: Optional[Mapping[str, Any]] = None,
                idle_timeout_ms: Optional[int] = None, env: Optional[Mapping[str, str]] = None,
                files: Optional[Files] = None, lifetime_ms: Optional[int] = None,
                allowed_imports: Optional[Iterable[str]] = None, idle_action: Optional[str] = None,
                network: Any = None, language: Optional[str] = None, volumes: Any = None,
                datasets: Optional[Sequence[str]] = None, lifetime_action: Optional[str] = None,
                init: bool = False, processes: bool = False) -> Session:
        """Starts a session (a persistent Python interpreter and /workspace)
        and returns it once ready. Use it as a context manager to close it.
        lifetime_ms ends it that long after its creation (default: the
        daemon's max_lifetime); allowed_imports binds every exec;
        idle_action "pause" pauses it at its idle timeout instead of ending
        it ("end"), "park" parks it; lifetime_action "park" parks it at the
        end of its lifetime instead of ending it; language "javascript" or "typescript"
        makes it a Node.js session (on a rootfs with Node.js); volumes and
        datasets are mounted for its whole life, as in run(); init makes its
        interpreter pid 1's child, as in run(); processes starts its
        sandbox's process agent, which Session.watch needs."""
        req = _wire.session_body(rootfs, limits, idle_timeout_ms, env, files, lifetime_ms, allowed_imports,
                                 idle_action, network, language, volumes, datasets, lifetime_action, init,
                                 processes)
        info = self._json("POST", API + "/sessions", req)
        return Session(self, info["id"], info)

    def sessions(self) -> List[Dict[str, Any]]:
        """Lists the caller's sessions (dicts, as GET /v1/sessions)."""
        return _wire.listed(self._json("GET", API + "/sessions"), "sessions")

    def create_volume(self, name: str, size_bytes: int) -> Volume:
        """Creates a named volume of size_bytes (a write past it fails
        inside with ENOSPC); mount it with run(volumes=[name]) or
        session(volumes=[name]). It lives until deleted, across sessions
        and daemon restarts."""
        _wire.volume_path(name)
        self._json("POST", API + "/volumes", {"name": name, "size_bytes": size_bytes})
        return Volume(self, name)

    def volume(self, name: str) -> Volume:
        """An existing volume by name (no request is made)."""
        _wire.volume_path(name)
        return Volume(self, name)

    def volumes(self) -> List[Dict[str, Any]]:
        """Lists the caller's volumes: dicts with name, size_bytes, used_bytes, in_use, owner_uid."""
        return _wire.listed(self._json("GET", API + "/volumes"), "volumes")


class Session:
    """A live session: exec code in one interpreter, move files in and out
    of its /workspace. Closing it (close() or leaving a with block) ends it."""

    def __init__(self, client: Client, session_id: str, info: Optional[Dict[str, Any]] = None):
        self.client = client
        self.id = session_id
        self.created = info
        self._path = _wire.session_path(session_id)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "Session(%r)" % self.id

    def info(self) -> Dict[str, Any]:
        """The session's state ("idle", "busy", "dead" with dead_reason), limits, exec count, expires_at."""
        return self.client._json("GET", self._path)

    def exec(self, code: str, timeout_ms: Optional[int] = None, on_stdout: Output = None,
             on_stderr: Output = None, context: Optional[str] = None,
             env: Optional[Mapping[str, str]] = None) -> Result:
        """Runs code in the session and returns its Result: value (repr of
        the last expression), exception, figures, files changed. State
        persists between execs. on_stdout/on_stderr stream the output.
        context names a namespace of the interpreter of its own (its own
        variables; the same files); env holds variables for this exec
        only."""
        req = _wire.exec_body(code, timeout_ms, context, env)
        deadline = self.client._deadline(timeout_ms, _wire.exec_fallback_ms(self.created))
        if on_stdout is not None or on_stderr is not None:
            return self.client._stream(self._path + "/exec", req, on_stdout, on_stderr, deadline)
        return Result(self.client._json("POST", self._path + "/exec", req, deadline=deadline))

    def pause(self) -> Dict[str, Any]:
        """Freezes the session: its processes keep their memory and use no
        CPU until resume() or the next exec. Returns the session's info."""
        return self.client._json("POST", self._path + "/pause")

    def resume(self) -> Dict[str, Any]:
        """Thaws a paused session. Returns the session's info."""
        return self.client._json("POST", self._path + "/resume")

    def fork(self, count: int = 1) -> List[Session]:
        """Branches the session: count (1-16) new sessions, each starting
        with this one's Python variables and a copy of its /workspace, in
        sandboxes of their own. Each branch's .not_carried lists the
        names its state left behind (open files, sockets, threads...)."""
        answer = self.client._json("POST", self._path + "/fork", _wire.fork_body(count))
        return [Session(self.client, b["id"], b) for b in answer.get("sessions") or []]

    def park(self) -> Dict[str, Any]:
        """Parks the session on the daemon's disk: its sandbox ends, its
        state and /workspace wait there (across daemon restarts) until the
        next exec or revive(). Returns the session's info ("parked")."""
        return self.client._json("POST", self._path + "/park")

    def revive(self) -> Dict[str, Any]:
        """Revives a parked session into a fresh sandbox now (the next
        exec would too). Returns its info with "not_carried"."""
        return self.client._json("POST", self._path + "/revive")

    @property
    def not_carried(self) -> List[Dict[str, Any]]:
        """What this session's state left behind when it was made by a
        fork: dicts with name, reason (and context)."""
        return list((self.created or {}).get("not_carried") or [])

    def upload(self, path: str, data: Any) -> None:
        """Writes data (bytes, str or a file object) to path under
        /workspace, creating parent directories."""
        self.client._call("PUT", _wire.file_url(self.id, path), _wire.upload_bytes(data),
                          {"Content-Type": "application/octet-stream"})

    def download(self, path: str) -> bytes:
        """Reads a file of /workspace."""
        return self.client._call("GET", _wire.file_url(self.id, path))

    def delete_file(self, path: str) -> None:
        """Removes a file of /workspace."""
        self.client._call("DELETE", _wire.file_url(self.id, path))

    def files(self) -> List[Dict[str, Any]]:
        """Lists /workspace: dicts with path, size, mode, mtime, sha256, mime, dir, symlink."""
        return _wire.listed(self.client._json("GET", self._path + "/files"), "files")

    def watch(self, path: str = "", recursive: bool = False) -> Watch:
        """Starts watching a directory of the session's /workspace ("" the
        workspace) and returns once the watch runs; iterate it for the
        changes as they happen, dicts {"type": "create"|"write"|"remove"|
        "rename"|"chmod"|"overflow", "name": path under the directory}
        (docs/API.md). The iteration ends when the directory goes and
        raises the session's error when it ends; close the watch (or use
        it with `with`) to stop. The session needs processes=True."""
        return Watch(self.client, _wire.watch_path(self.id, path, recursive))

    def terminal(self, argv: Optional[Sequence[str]] = None, cols: int = 80, rows: int = 24,
                 env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None) -> Terminal:
        """Opens a terminal in the session's sandbox: argv (default
        ["/bin/bash", "-i", "-l"]) on a pseudo-terminal of cols x rows, as
        the sandbox's user, in /workspace (or cwd); env is added (TERM is
        xterm-256color unless set). Returns a Terminal once the process
        runs: write() to it, iterate it (or read()) for its output,
        resize(), signal(), wait() for its exit code; close() (or leaving
        its with block) kills it. The session needs processes=True
        (InvalidArgument without)."""
        return terminal.open_sync(self.client, self.id, terminal.terminal_body(argv, cols, rows, env, cwd))

    def port(self, port: int) -> Port:
        """A port of the session's sandbox (no request is made): request()
        sends HTTP to the server listening on it (on 127.0.0.1 or 0.0.0.0
        in the sandbox), connect() opens a raw connection to it, forward()
        serves a local TCP port for it (a browser, urllib), as `nsbox
        session port` does."""
        return Port(self.client, self.id, port)

    def close(self) -> None:
        """Ends the session (idempotent)."""
        try:
            self.client._call("DELETE", self._path)
        except NotFound:
            pass


class Volume:
    """A named volume: files that outlive sandboxes, mounted by runs and
    sessions under /mnt. Its file methods work on it from the host, never
    following a symlink."""

    def __init__(self, client: Client, name: str):
        self.client = client
        self.name = name
        self._path = _wire.volume_path(name)

    def __repr__(self) -> str:
        return "Volume(%r)" % self.name

    def info(self) -> Dict[str, Any]:
        """name, size_bytes, used_bytes, in_use (live sandboxes mounting it), owner_uid."""
        return self.client._json("GET", self._path)

    def upload(self, path: str, data: Any) -> None:
        """Writes data (bytes, str or a file object) to path in the volume."""
        self.client._call("PUT", _wire.volume_file_url(self.name, path), _wire.upload_bytes(data),
                          {"Content-Type": "application/octet-stream"})

    def download(self, path: str) -> bytes:
        """Reads a file of the volume."""
        return self.client._call("GET", _wire.volume_file_url(self.name, path))

    def delete_file(self, path: str) -> None:
        """Removes a file of the volume."""
        self.client._call("DELETE", _wire.volume_file_url(self.name, path))

    def files(self) -> List[Dict[str, Any]]:
        """Lists the volume's files, as Session.files()."""
        return _wire.listed(self.client._json("GET", self._path + "/files"), "files")

    def delete(self) -> None:
        """Deletes the volume and its files (refused while a sandbox mounts it)."""
        self.client._call("DELETE", self._path)


class Watch:
    """A running watch of a session's directory (Session.watch)."""

    def __init__(self, client: Client, path: str):
        self._what = "GET " + path
        self._conn, self._resp = client._open("GET", path, None, {"Accept": NDJSON}, None)
        try:
            start = _wire.json_object(self._line(), self._what)
        except BaseException:
            self.close()
            raise
        self.path: str = start.get("path", "")  # the directory, as the sandbox names it

    def _line(self) -> bytes:
        try:
            line = self._resp.readline()
        except (OSError, http.client.HTTPException) as e:
            raise _wire.cut_off("GET", self._what[4:]) from e
        if not line:
            raise _wire.cut_off("GET", self._what[4:])
        return line

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        try:
            while True:
                ev = _wire.watch_event(self._line(), self._what)
                if ev is None:
                    return
                yield ev
        finally:
            self.close()

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stops the watch."""
        self._conn.close()
