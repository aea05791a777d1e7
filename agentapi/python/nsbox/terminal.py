"""Terminals in a session (Session.terminal, AsyncSession.terminal): a
process on a pseudo-terminal of the session's sandbox, over the daemon's
nsbox-terminal.1 connection (docs/API.md, POST /v1/sessions/{id}/terminal).

The output is read when the caller reads it, never ahead: the client
holds at most one frame (1 MiB) and what one socket read brought, and the
daemon holds a bounded amount too. A terminal whose output is left unread
for 10 s is ended by the daemon (ResourceExhausted once what came before
is read)."""

from __future__ import annotations

import asyncio
import select
import signal as _signal
import socket
import struct
import threading
import time
from typing import Any, AsyncIterator, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _upgrade, _wire
from .errors import InvalidArgument, NotFound, NsboxError, RequestTimeout, ResourceExhausted, SessionDead

__all__ = ["Terminal", "AsyncTerminal"]

PROTOCOL = "nsbox-terminal.1"
MAX_PAYLOAD = 1 << 20
#: read_until's bound on what it gathers looking for its marker.
MAX_UNTIL = 16 << 20

Signal = Union[int, str, _signal.Signals]


def terminal_body(argv: Optional[Sequence[str]], cols: int, rows: int, env: Optional[Mapping[str, str]],
                  cwd: Optional[str]) -> Dict[str, Any]:
    """The body of POST /v1/sessions/{id}/terminal."""
    body: Dict[str, Any] = {}
    if argv is not None:
        if isinstance(argv, str) or not argv or not all(isinstance(a, str) for a in argv):
            raise TypeError("argv: give a non-empty list of str, e.g. ['/bin/sh'], not %r" % (argv,))
        body["cmd"], body["args"] = argv[0], list(argv[1:])
    for name, n in (("cols", cols), ("rows", rows)):
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 65535:
            raise InvalidArgument("invalid_argument", "%s %r: give a number of %s from 1 to 65535" % (name, n, name), 400)
        body[name] = n
    if env is not None:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise TypeError("env: give a mapping of str to str")
        body["env"] = dict(env)
    if cwd is not None:
        body["cwd"] = cwd
    return body


def frame(typ: bytes, payload: bytes) -> bytes:
    return typ + struct.pack(">I", len(payload)) + payload


def input_frames(data: Union[bytes, str]) -> List[bytes]:
    if isinstance(data, str):
        data = data.encode("utf-8")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError("write: give bytes or str, not %s" % type(data).__name__)
    data = bytes(data)
    return [frame(b"i", data[i:i + MAX_PAYLOAD]) for i in range(0, len(data), MAX_PAYLOAD)]


def resize_frame(cols: int, rows: int) -> bytes:
    terminal_body(None, cols, rows, None, None)  # checks them
    return frame(b"r", struct.pack(">HH", rows, cols))


def signal_frame(sig: Signal) -> bytes:
    """sig: a number, a name ("INT", "SIGINT") or a signal.Signals."""
    if isinstance(sig, str):
        name = sig.upper()
        try:
            sig = _signal.Signals[name if name.startswith("SIG") else "SIG" + name]
        except KeyError:
            raise InvalidArgument("invalid_argument", "signal %r: not a signal's name (INT, TERM, KILL, ...)" % sig, 400) from None
    n = int(sig)
    if not 1 <= n <= 31:
        raise InvalidArgument("invalid_argument", "signal %d: give a signal from 1 to 31" % n, 400)
    return frame(b"s", struct.pack(">I", n))


def ended_early(what: str, text: str) -> NsboxError:
    """The error of an "e" frame: the client fell behind its output (the
    daemon's 10 s), or the session ended under the terminal."""
    if "fell behind" in text:
        return fell_behind(what, text)
    return SessionDead("session_dead", "%s: the terminal ended with its session: %s" % (what, text))


def fell_behind(what: str, text: str) -> NsboxError:
    return ResourceExhausted("resource_exhausted", "%s: the daemon ended the terminal: %s (its output was left "
                             "unread for 10 s: read it as it comes, or close the terminal)" % (what, text))


def cut_without_exit(what: str, session: Any) -> NsboxError:
    """Why a terminal's connection closed before its exit, from its
    session's info (or the error getting it): the session ended; or it
    lives, and the daemon gave up writing output the client left unread
    (the only other way it closes a terminal's connection early)."""
    if isinstance(session, NotFound):
        return SessionDead("session_dead", "%s: the terminal ended with its session (%s)" % (what, session.message))
    if isinstance(session, BaseException):
        return _wire.cut_off("POST", what[5:])
    if session.get("state") == "dead":
        return SessionDead("session_dead", "%s: the terminal ended with its session (%s)" % (
            what, session.get("dead_reason") or "dead"))
    return fell_behind(what, "its connection was closed")


class Frames:
    """Cuts the connection's bytes into frames; holds at most one frame
    and what one read brought beyond it."""

    def __init__(self, what: str):
        self.what = what
        self.buf = b""

    def next(self) -> Optional[Tuple[bytes, bytes]]:
        if len(self.buf) < 5:
            return None
        n = struct.unpack(">I", self.buf[1:5])[0]
        if n > MAX_PAYLOAD:
            raise NsboxError("internal", "%s: a terminal frame of %d bytes" % (self.what, n))
        if len(self.buf) < 5 + n:
            return None
        typ, payload, self.buf = self.buf[:1], self.buf[5:5 + n], self.buf[5 + n:]
        return typ, payload


class _Base:
    """What Terminal and AsyncTerminal share: what came, and what it means."""

    def __init__(self, client: Any, session_id: str, what: str, hdrs: Mapping[str, str]):
        self._client, self._session = client, session_id
        self._what = what
        pid = hdrs.get("nsbox-terminal-pid", "")
        self.pid: int = int(pid) if pid.isdigit() else 0  # as the sandbox numbers it
        #: How it ended, once it has: {"exit_code": N, "status": ...}, with "signal" when one killed it.
        self.exit: Optional[Dict[str, Any]] = None
        self._pending = b""
        self._closed = False

    @property
    def exit_code(self) -> Optional[int]:
        """The exit status once it has ended (-1 when a signal ended it: see exit["signal"]); else None."""
        return None if self.exit is None else int(self.exit.get("exit_code", -1))

    def _take(self, typ: bytes, payload: bytes) -> Optional[bytes]:
        """Output for a frame, b"" at the exit; None for a frame to skip."""
        if typ == b"o":
            return payload or None
        if typ == b"x":
            self.exit = _wire.json_object(payload, self._what)
            return b""
        if typ == b"e":
            raise ended_early(self._what, payload.decode("utf-8", "replace"))
        raise NsboxError("internal", "%s: a terminal frame of type %r" % (self._what, typ))

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidArgument("invalid_argument", "%s: the terminal is closed" % self._what, 400)
        if self.exit is not None:
            raise InvalidArgument("invalid_argument", "%s: the terminal has ended (%s)" % (
                self._what, self.exit.get("status")), 400)

    def _not_seen(self, got: bytes, marker: bytes, timeout: Optional[float]) -> RequestTimeout:
        """read_until's timeout: what came is kept for the next read."""
        self._pending = got + self._pending
        return RequestTimeout("timeout", "%s: %r not seen within %ss; the output: %r" % (
            self._what, marker, timeout, got[-500:]))

    def _ended_before(self, got: bytes, marker: bytes) -> NsboxError:
        return NsboxError("internal", "%s: the terminal ended (%s) before %r; the output: %r" % (
            self._what, (self.exit or {}).get("status"), marker, got[-500:]))

    def _until(self, got: bytes, marker: bytes) -> Optional[bytes]:
        i = got.find(marker)
        if i < 0:
            if len(got) > MAX_UNTIL:
                raise NsboxError("internal", "%s: %r not seen in %d bytes of output" % (self._what, marker, len(got)))
            return None
        self._pending = got[i + len(marker):]
        return got[:i + len(marker)]


class Terminal(_Base):
    """A terminal in a session (Session.terminal). write() what is typed;
    iterate it (or read()) for the output, as bytes, until its process
    ends; wait() for its exit code. Closing it (or leaving its with block)
    kills its process and every process it started."""

    def __init__(self, client: Any, session_id: str, sock: socket.socket, hdrs: Mapping[str, str], what: str):
        super().__init__(client, session_id, what, hdrs)
        self._sock = sock
        self._frames = Frames(what)
        self._wlock = threading.Lock()

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "Terminal(pid=%d, exit=%r)" % (self.pid, self.exit)

    def _send(self, data: bytes) -> None:
        self._check_open()
        with self._wlock:
            try:
                self._sock.sendall(data)
            except OSError as e:
                raise NsboxError("internal", "%s: the terminal's connection closed" % self._what) from e

    def write(self, data: Union[bytes, str]) -> None:
        """Types data (str is UTF-8): "\\r" is Enter, "\\x03" Ctrl-C, "\\x04" Ctrl-D."""
        for f in input_frames(data):
            self._send(f)

    def resize(self, cols: int, rows: int) -> None:
        """Sets the window size; the foreground job gets SIGWINCH."""
        self._send(resize_frame(cols, rows))

    def signal(self, sig: Signal) -> None:
        """Sends sig ("INT", "SIGTERM", 15, signal.SIGHUP) to the terminal's
        foreground process group; "KILL" to every process of the terminal."""
        self._send(signal_frame(sig))

    def read(self, timeout: Optional[float] = None) -> bytes:
        """The next output, as it comes; b"" once the process has ended
        (then exit_code is set). timeout: seconds to wait (None: as long as
        it takes); past it RequestTimeout, and nothing is lost."""
        if self._pending:
            out, self._pending = self._pending, b""
            return out
        if self.exit is not None:
            return b""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            f = self._frames.next()
            if f is not None:
                out = self._take(*f)
                if out is not None:
                    return out
                continue
            if deadline is not None:  # timeout=0: what has come, else RequestTimeout at once
                left = max(0.0, deadline - time.monotonic())
                if not select.select([self._sock], [], [], left)[0]:
                    raise RequestTimeout("timeout", "%s: no output within %ss" % (self._what, timeout))
            try:
                data = self._sock.recv(65536)
            except OSError as e:
                if self._closed:
                    raise InvalidArgument("invalid_argument", "%s: the terminal is closed" % self._what, 400) from e
                raise self._cut() from e
            if not data:
                if self._closed:  # close() from another thread
                    raise InvalidArgument("invalid_argument", "%s: the terminal is closed" % self._what, 400)
                raise self._cut()
            self._frames.buf += data

    def _cut(self) -> NsboxError:
        try:
            info: Any = self._client._json("GET", _wire.session_path(self._session))
        except NsboxError as e:
            info = e
        return cut_without_exit(self._what, info)

    def __iter__(self) -> Iterator[bytes]:
        while True:
            out = self.read()
            if not out:
                return
            yield out

    def read_until(self, marker: Union[bytes, str], timeout: Optional[float] = None) -> bytes:
        """The output up to and including marker (what follows it is kept
        for the next read); timeout bounds the whole wait (RequestTimeout);
        the process's end before the marker raises NsboxError."""
        if isinstance(marker, str):
            marker = marker.encode("utf-8")
        deadline = None if timeout is None else time.monotonic() + timeout
        got = b""
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                out = self.read(left)
            except RequestTimeout as e:
                raise self._not_seen(got, marker, timeout) from e
            if not out:
                raise self._ended_before(got, marker)
            got += out
            found = self._until(got, marker)
            if found is not None:
                return found

    def wait(self, timeout: Optional[float] = None) -> int:
        """Waits for the process to end and returns its exit code (-1 for
        a signal: exit["signal"] says which); output not yet read is
        skipped. timeout: RequestTimeout past it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.exit is None:
            self._pending = b""
            self.read(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return int(self.exit.get("exit_code", -1))

    def close(self) -> None:
        """Closes the connection; the daemon kills the terminal's processes
        (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()


class AsyncTerminal(_Base):
    """A terminal in a session (AsyncSession.terminal), as nsbox.Terminal
    with coroutine methods; iterate it with `async for`."""

    def __init__(self, client: Any, session_id: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 hdrs: Mapping[str, str], what: str):
        super().__init__(client, session_id, what, hdrs)
        self._reader, self._writer = reader, writer
        self._head: Optional[bytes] = None  # a frame's header read, its payload not yet
        self._wlock = asyncio.Lock()

    async def __aenter__(self) -> AsyncTerminal:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "AsyncTerminal(pid=%d, exit=%r)" % (self.pid, self.exit)

    async def _send(self, data: bytes) -> None:
        self._check_open()
        async with self._wlock:
            try:
                self._writer.write(data)
                await self._writer.drain()
            except OSError as e:
                raise NsboxError("internal", "%s: the terminal's connection closed" % self._what) from e

    async def write(self, data: Union[bytes, str]) -> None:
        for f in input_frames(data):
            await self._send(f)

    async def resize(self, cols: int, rows: int) -> None:
        await self._send(resize_frame(cols, rows))

    async def signal(self, sig: Signal) -> None:
        await self._send(signal_frame(sig))

    async def _frame(self) -> Tuple[bytes, bytes]:
        # A timeout may cancel either read: the header read is kept, so
        # the next call reads its payload, and readexactly takes nothing
        # from the buffer until it has it all.
        try:
            if self._head is None:
                self._head = await self._reader.readexactly(5)
            n = struct.unpack(">I", self._head[1:])[0]
            if n > MAX_PAYLOAD:
                raise NsboxError("internal", "%s: a terminal frame of %d bytes" % (self._what, n))
            payload = await self._reader.readexactly(n)
        except (asyncio.IncompleteReadError, OSError) as e:
            if self._closed:
                raise InvalidArgument("invalid_argument", "%s: the terminal is closed" % self._what, 400) from e
            try:
                info: Any = await self._client._json("GET", _wire.session_path(self._session))
            except NsboxError as ie:
                info = ie
            raise cut_without_exit(self._what, info) from e
        typ, self._head = self._head[:1], None
        return typ, payload

    async def read(self, timeout: Optional[float] = None) -> bytes:
        """As nsbox.Terminal.read."""
        if self._pending:
            out, self._pending = self._pending, b""
            return out
        if self.exit is not None:
            return b""
        while True:
            try:
                f = await asyncio.wait_for(self._frame(), timeout)
            except asyncio.TimeoutError as e:
                raise RequestTimeout("timeout", "%s: no output within %ss" % (self._what, timeout)) from e
            out = self._take(*f)
            if out is not None:
                return out

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            out = await self.read()
            if not out:
                return
            yield out

    async def read_until(self, marker: Union[bytes, str], timeout: Optional[float] = None) -> bytes:
        """As nsbox.Terminal.read_until."""
        if isinstance(marker, str):
            marker = marker.encode("utf-8")
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        got = b""
        while True:
            left = None if deadline is None else max(0.0, deadline - loop.time())
            try:
                out = await self.read(left)
            except RequestTimeout as e:
                raise self._not_seen(got, marker, timeout) from e
            if not out:
                raise self._ended_before(got, marker)
            got += out
            found = self._until(got, marker)
            if found is not None:
                return found

    async def wait(self, timeout: Optional[float] = None) -> int:
        """As nsbox.Terminal.wait."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while self.exit is None:
            self._pending = b""
            await self.read(None if deadline is None else max(0.0, deadline - loop.time()))
        return int(self.exit.get("exit_code", -1))

    def close(self) -> None:
        """As nsbox.Terminal.close."""
        self._closed = True
        self._writer.close()


def open_sync(client: Any, session_id: str, body: Dict[str, Any]) -> Terminal:
    path = _wire.session_path(session_id) + "/terminal"
    sock, hdrs = _upgrade.open_sync(client, "POST", path, PROTOCOL, body)
    return Terminal(client, session_id, sock, hdrs, "POST " + path)


async def open_async(client: Any, session_id: str, body: Dict[str, Any]) -> AsyncTerminal:
    path = _wire.session_path(session_id) + "/terminal"
    reader, writer, hdrs = await _upgrade.open_async(client, "POST", path, PROTOCOL, body)
    return AsyncTerminal(client, session_id, reader, writer, hdrs, "POST " + path)

