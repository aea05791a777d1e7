"""The asyncio client of the nsbox daemon: the same API as nsbox.Client, on
the standard library's asyncio streams (no dependency)::

    import asyncio, nsbox.aio

    async def main():
        client = nsbox.aio.AsyncClient()
        r = await client.run(code="print(6 * 7)")
        async with await client.session() as s:
            await s.exec("x = 41")
            print((await s.exec("x + 1")).value)   # "42"

    asyncio.run(main())

Each request is one HTTP/1.1 exchange on its own connection to the Unix
socket; callbacks passed as on_stdout/on_stderr may be plain functions or
coroutine functions.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _wire, terminal
from ._wire import API, NDJSON, Batch, Files, Result
from .errors import DaemonUnreachable, NotFound, NsboxError, RequestTimeout
from .ports import AsyncPort
from .terminal import AsyncTerminal

__all__ = ["AsyncClient", "AsyncSession", "AsyncTerminal", "AsyncPort"]

Output = Optional[Callable[[str], Union[Any, Awaitable[Any]]]]

_MAX_HEADER_LINE = 64 << 10
_MAX_LINE = 64 << 20  # one NDJSON event, as the daemon bounds a stream chunk
_CONTINUE_AT = 1 << 20  # bodies above this wait for 100 Continue


class _Response:
    """A response read off an asyncio stream: status, headers, body reader."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, method: str, path: str,
                 status: int, headers: Dict[str, str], timeout: Optional[float]):
        self.reader, self.writer = reader, writer
        self.method, self.path = method, path
        self.status, self.headers = status, headers
        self.timeout = timeout
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        self._left: Optional[int] = None
        if length is not None and not self._chunked:
            if not length.isdigit():
                raise self._malformed("Content-Length %r" % length)
            self._left = int(length)
        self._buf = b""
        self._eof = False

    async def _read(self, coro: Awaitable[bytes]) -> bytes:
        try:
            return await asyncio.wait_for(coro, self.timeout)
        except asyncio.TimeoutError as e:
            raise RequestTimeout("timeout", "%s %s: no answer from the nsbox daemon within %ss" % (
                self.method, self.path, self.timeout)) from e
        except (asyncio.IncompleteReadError, OSError) as e:
            raise _wire.cut_off(self.method, self.path) from e
        except asyncio.LimitOverrunError as e:
            raise self._malformed("a chunk header longer than %d bytes" % _MAX_HEADER_LINE) from e

    def _malformed(self, what: str) -> NsboxError:
        return NsboxError("internal", "%s %s: not an HTTP/1.1 answer: %s" % (self.method, self.path, what))

    async def _chunk(self) -> bytes:
        """The next piece of the body; b"" at its end."""
        if self._eof:
            return b""
        if self._chunked:
            size_line = await self._read(self.reader.readuntil(b"\r\n"))
            try:
                size = int(size_line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise self._malformed("chunk size %r" % size_line[:40]) from None
            if size == 0:
                while (await self._read(self.reader.readuntil(b"\r\n"))) != b"\r\n":
                    pass  # trailers
                self._eof = True
                return b""
            data = await self._read(self.reader.readexactly(size + 2))
            return data[:-2]
        if self._left is not None:
            if self._left == 0:
                self._eof = True
                return b""
            data = await self._read(self.reader.read(min(self._left, 1 << 16)))
            if not data:
                raise _wire.cut_off(self.method, self.path)
            self._left -= len(data)
            return data
        data = await self._read(self.reader.read(1 << 16))
        if not data:
            self._eof = True
        return data

    async def read(self) -> bytes:
        parts = [self._buf]
        self._buf = b""
        while True:
            c = await self._chunk()
            if not c:
                return b"".join(parts)
            parts.append(c)

    async def readline(self) -> bytes:
        while b"\n" not in self._buf:
            c = await self._chunk()
            if not c:
                line, self._buf = self._buf, b""
                return line
            self._buf += c
            if len(self._buf) > _MAX_LINE:
                raise NsboxError("internal", "a stream event longer than %d bytes" % _MAX_LINE)
        line, _, self._buf = self._buf.partition(b"\n")
        return line + b"\n"

    def close(self) -> None:
        self.writer.close()


class AsyncClient(_wire.ClientBase):
    """An asyncio client of one nsbox daemon; arguments as nsbox.Client."""

    async def _exchange(self, method: str, path: str, body: bytes, headers: Dict[str, str],
                        timeout: Optional[float], first: Optional[float], queued: bool) -> _Response:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(self.socket_path, limit=_MAX_HEADER_LINE), self.connect_timeout)
        except asyncio.TimeoutError as e:
            raise DaemonUnreachable("unreachable", _wire.unreachable_message(
                self.socket_path, TimeoutError("connect timed out after %ss" % self.connect_timeout))) from e
        except OSError as e:
            raise DaemonUnreachable("unreachable", _wire.unreachable_message(self.socket_path, e)) from e
        try:
            head = ["%s %s HTTP/1.1" % (method, path), "Host: nsbox", "Connection: close",
                    "Content-Length: %d" % len(body)]
            head += ["%s: %s" % kv for kv in headers.items()]
            # A big body waits for the daemon's 100 Continue: a body over
            # its cap gets the 413 before a byte of it is sent (a body
            # written into a closed socket would lose that answer).
            expect = len(body) > _CONTINUE_AT
            if expect:
                head.append("Expect: 100-continue")
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (b"" if expect else body))
            try:
                await asyncio.wait_for(writer.drain(), timeout)
                while True:
                    status, hdrs = await self._read_head(reader, method, path, first, timeout)
                    if status != 100:
                        break
                    if expect:
                        expect = False
                        writer.write(body)
                        await asyncio.wait_for(writer.drain(), timeout)
            except asyncio.TimeoutError as e:
                if queued:
                    raise RequestTimeout("timeout", self._queue_message(path, first)) from e
                raise RequestTimeout("timeout", "%s %s: no answer from the nsbox daemon at %s within %ss" % (
                    method, path, self.socket_path, timeout)) from e
            except (OSError, ValueError) as e:
                raise DaemonUnreachable("unreachable", _wire.unreachable_message(self.socket_path, e)) from e
            return _Response(reader, writer, method, path, status, hdrs, timeout)
        except BaseException:
            writer.close()
            raise

    @staticmethod
    async def _read_head(reader: asyncio.StreamReader, method: str, path: str, first: Optional[float],
                         timeout: Optional[float]) -> Tuple[int, Dict[str, str]]:
        """Reads a response's status line (within first) and headers."""
        status_line = await asyncio.wait_for(reader.readline(), first)
        if not status_line:  # as http.client's RemoteDisconnected
            raise ConnectionError("it closed the connection without an answer")
        parts = status_line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
            raise NsboxError("internal", "%s %s: not an HTTP/1.1 answer: %r" % (method, path, status_line[:80]))
        hdrs: Dict[str, str] = {}
        while True:
            line = await asyncio.wait_for(reader.readline(), timeout)
            if line in (b"\r\n", b"\n", b""):
                break
            k, _, v = line.decode("latin-1").partition(":")
            hdrs[k.strip().lower()] = v.strip()
        return int(parts[1]), hdrs

    async def _open(self, method: str, path: str, body: Any = None, headers: Optional[Dict[str, str]] = None,
                    deadline: Optional[float] = -1.0, queued: bool = False) -> _Response:
        """Sends a request, retrying 429 and 503, and returns a 2xx response
        (deadline and queued as nsbox.Client's)."""
        headers = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode("utf-8")
            headers.setdefault("Content-Type", "application/json")
        body = body or b""
        timeout = self.timeout if deadline == -1.0 else deadline
        waited, attempt = 0.0, 0
        while True:
            resp = await self._exchange(method, path, body, headers, timeout,
                                        self._queue_deadline() if queued else timeout, queued)
            if resp.status // 100 == 2:
                return resp
            try:
                err = _wire.error_from(resp.status, await resp.read(), resp.headers.get("retry-after"))
            finally:
                resp.close()
            attempt += 1
            delay = self.retry.delay(attempt, err, waited)
            if delay is None:
                raise err
            await asyncio.sleep(delay)
            waited += delay

    async def _call(self, method: str, path: str, body: Any = None, headers: Optional[Dict[str, str]] = None,
                    deadline: Optional[float] = -1.0) -> bytes:
        resp = await self._open(method, path, body, headers, deadline)
        try:
            return await resp.read()
        finally:
            resp.close()

    async def _json(self, method: str, path: str, body: Any = None,
                    deadline: Optional[float] = -1.0) -> Dict[str, Any]:
        data = await self._call(method, path, body, deadline=deadline)
        return _wire.json_object(data, "%s %s" % (method, path))

    async def _stream(self, path: str, body: Dict[str, Any], on_stdout: Output, on_stderr: Output,
                      deadline: Optional[float], queued: bool = False) -> Result:
        resp = await self._open("POST", path, body, {"Accept": NDJSON}, deadline, queued)
        try:
            while True:
                line = await resp.readline()
                if not line:
                    raise _wire.cut_off("POST", path)
                kind, val = _wire.stream_event(line, "POST " + path)
                if isinstance(val, Result):
                    return val
                cb = _wire.callback(kind, on_stdout, on_stderr)
                if cb is not None and val is not None:
                    out = cb(val)
                    if inspect.isawaitable(out):
                        await out
        finally:
            resp.close()

    async def _run_deadline(self, req: Dict[str, Any]) -> Optional[float]:
        if self._needs_timeouts(req):
            self._learn_timeouts(await self.info())
        return self._run_deadline_of(req)

    # --- API (as nsbox.Client)

    async def health(self) -> Dict[str, Any]:
        return await self._json("GET", API + "/health")

    async def info(self) -> Dict[str, Any]:
        return await self._json("GET", API + "/info")

    async def run(self, code: Optional[str] = None, argv: Optional[Sequence[str]] = None, language: str = "python",
                  files: Optional[Files] = None, limits: Optional[Mapping[str, Any]] = None,
                  stdin: Optional[str] = None, env: Optional[Mapping[str, str]] = None, rootfs: Optional[str] = None,
                  profile: Optional[str] = None, return_files: Optional[Sequence[str]] = None,
                  allowed_imports: Optional[Iterable[str]] = None, network: Any = None, on_stdout: Output = None,
                  on_stderr: Output = None, volumes: Any = None, datasets: Optional[Sequence[str]] = None,
                  init: bool = False) -> Result:
        """As nsbox.Client.run."""
        req = _wire.run_body(code, argv, language, files, limits, stdin, env, rootfs, profile, return_files,
                             allowed_imports, network, volumes, datasets, init)
        # Always streamed, as nsbox.Client.run.
        return await self._stream(API + "/runs", req, on_stdout, on_stderr, await self._run_deadline(req), queued=True)

    async def run_batch(self, runs: Iterable[Mapping[str, Any]], concurrency: Optional[int] = None,
                        on_item: Optional[Callable[[int, Any], Any]] = None) -> Batch:
        """As nsbox.Client.run_batch; on_item may be a coroutine function."""
        body = _wire.batch_body(runs, concurrency)
        if any(self._needs_timeouts(r) for r in body["runs"]):
            self._learn_timeouts(await self.info())
        answer = _wire.BatchAnswer(len(body["runs"]))
        path = API + "/runs:batch"
        resp = await self._open("POST", path, body, {"Accept": NDJSON}, self._batch_deadline_of(body["runs"]))
        try:
            while True:
                line = await resp.readline()
                if not line:
                    raise _wire.cut_off("POST", path)
                batch, item = answer.take(line, "POST " + path)
                if batch is not None:
                    return batch
                if item is not None and on_item is not None:
                    r = on_item(*item)
                    if inspect.isawaitable(r):
                        await r
        finally:
            resp.close()

    async def session(self, rootfs: Optional[str] = None, limits: Optional[Mapping[str, Any]] = None,
                      idle_timeout_ms: Optional[int] = None, env: Optional[Mapping[str, str]] = None,
                      files: Optional[Files] = None, lifetime_ms: Optional[int] = None,
                      allowed_imports: Optional[Iterable[str]] = None,
                      idle_action: Optional[str] = None, network: Any = None,
                      language: Optional[str] = None, volumes: Any = None,
                      datasets: Optional[Sequence[str]] = None,
                      lifetime_action: Optional[str] = None, init: bool = False,
                      processes: bool = False) -> AsyncSession:
        """As nsbox.Client.session; use the result with `async with`."""
        req = _wire.session_body(rootfs, limits, idle_timeout_ms, env, files, lifetime_ms, allowed_imports,
                                 idle_action, network, language, volumes, datasets, lifetime_action, init,
                                 processes)
        info = await self._json("POST", API + "/sessions", req)
        return AsyncSession(self, info["id"], info)

    async def sessions(self) -> List[Dict[str, Any]]:
        return _wire.listed(await self._json("GET", API + "/sessions"), "sessions")

    async def create_volume(self, name: str, size_bytes: int) -> AsyncVolume:
        """As nsbox.Client.create_volume."""
        _wire.volume_path(name)
        await self._json("POST", API + "/volumes", {"name": name, "size_bytes": size_bytes})
        return AsyncVolume(self, name)

    def volume(self, name: str) -> AsyncVolume:
        _wire.volume_path(name)
        return AsyncVolume(self, name)

    async def volumes(self) -> List[Dict[str, Any]]:
        return _wire.listed(await self._json("GET", API + "/volumes"), "volumes")


class AsyncSession:
    """A live session, as nsbox.Session with coroutine methods."""

    def __init__(self, client: AsyncClient, session_id: str, info: Optional[Dict[str, Any]] = None):
        self.client = client
        self.id = session_id
        self.created = info
        self._path = _wire.session_path(session_id)

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return "AsyncSession(%r)" % self.id

    async def info(self) -> Dict[str, Any]:
        return await self.client._json("GET", self._path)

    async def watch(self, path: str = "", recursive: bool = False) -> AsyncWatch:
        """As nsbox.Session.watch; iterate it with `async for`."""
        w = AsyncWatch(_wire.watch_path(self.id, path, recursive))
        await w._start(self.client)
        return w

    async def exec(self, code: str, timeout_ms: Optional[int] = None, on_stdout: Output = None,
                   on_stderr: Output = None, context: Optional[str] = None,
                   env: Optional[Mapping[str, str]] = None) -> Result:
        req = _wire.exec_body(code, timeout_ms, context, env)
        deadline = self.client._deadline(timeout_ms, _wire.exec_fallback_ms(self.created))
        if on_stdout is not None or on_stderr is not None:
            return await self.client._stream(self._path + "/exec", req, on_stdout, on_stderr, deadline)
        return Result(await self.client._json("POST", self._path + "/exec", req, deadline=deadline))

    async def pause(self) -> Dict[str, Any]:
        return await self.client._json("POST", self._path + "/pause")

    async def resume(self) -> Dict[str, Any]:
        return await self.client._json("POST", self._path + "/resume")

    async def fork(self, count: int = 1) -> List[AsyncSession]:
        """As nsbox.Session.fork."""
        answer = await self.client._json("POST", self._path + "/fork", _wire.fork_body(count))
        return [AsyncSession(self.client, b["id"], b) for b in answer.get("sessions") or []]

    async def park(self) -> Dict[str, Any]:
        return await self.client._json("POST", self._path + "/park")

    async def revive(self) -> Dict[str, Any]:
        return await self.client._json("POST", self._path + "/revive")

    @property
    def not_carried(self) -> List[Dict[str, Any]]:
        return list((self.created or {}).get("not_carried") or [])

    async def upload(self, path: str, data: Any) -> None:
        await self.client._call("PUT", _wire.file_url(self.id, path), _wire.upload_bytes(data),
                                {"Content-Type": "application/octet-stream"})

    async def download(self, path: str) -> bytes:
        return await self.client._call("GET", _wire.file_url(self.id, path))

    async def delete_file(self, path: str) -> None:
        await self.client._call("DELETE", _wire.file_url(self.id, path))

    async def files(self) -> List[Dict[str, Any]]:
        return _wire.listed(await self.client._json("GET", self._path + "/files"), "files")

    async def terminal(self, argv: Optional[Sequence[str]] = None, cols: int = 80, rows: int = 24,
                       env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None) -> AsyncTerminal:
        """As nsbox.Session.terminal; use it with `async with`, iterate it with `async for`."""
        return await terminal.open_async(self.client, self.id, terminal.terminal_body(argv, cols, rows, env, cwd))

    def port(self, port: int) -> AsyncPort:
        """As nsbox.Session.port, with coroutine methods."""
        return AsyncPort(self.client, self.id, port)

    async def close(self) -> None:
        try:
            await self.client._call("DELETE", self._path)
        except NotFound:
            pass


class AsyncVolume:
    """A named volume, as nsbox.Volume with coroutine methods."""

    def __init__(self, client: AsyncClient, name: str):
        self.client = client
        self.name = name
        self._path = _wire.volume_path(name)

    def __repr__(self) -> str:
        return "AsyncVolume(%r)" % self.name

    async def info(self) -> Dict[str, Any]:
        return await self.client._json("GET", self._path)

    async def upload(self, path: str, data: Any) -> None:
        await self.client._call("PUT", _wire.volume_file_url(self.name, path), _wire.upload_bytes(data),
                                {"Content-Type": "application/octet-stream"})

    async def download(self, path: str) -> bytes:
        return await self.client._call("GET", _wire.volume_file_url(self.name, path))

    async def delete_file(self, path: str) -> None:
        await self.client._call("DELETE", _wire.volume_file_url(self.name, path))

    async def files(self) -> List[Dict[str, Any]]:
        return _wire.listed(await self.client._json("GET", self._path + "/files"), "files")

    async def delete(self) -> None:
        await self.client._call("DELETE", self._path)


class AsyncWatch:
    """A running watch of a session's directory (AsyncSession.watch), as
    nsbox.Watch."""

    def __init__(self, path: str):
        self._what = "GET " + path
        self._resp: Optional[_Response] = None
        self.path = ""

    async def _start(self, client: AsyncClient) -> None:
        self._resp = await client._open("GET", self._what[4:], None, {"Accept": NDJSON}, None)
        try:
            self.path = _wire.json_object(await self._line(), self._what).get("path", "")
        except BaseException:
            self.close()
            raise

    async def _line(self) -> bytes:
        assert self._resp is not None
        line = await self._resp.readline()
        if not line:
            raise _wire.cut_off("GET", self._what[4:])
        return line

    async def __aiter__(self) -> AsyncIterator[Dict[str, Any]]:
        try:
            while True:
                ev = _wire.watch_event(await self._line(), self._what)
                if ev is None:
                    return
                yield ev
        finally:
            self.close()

    async def __aenter__(self) -> AsyncWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stops the watch."""
        if self._resp is not None:
            self._resp.close()
