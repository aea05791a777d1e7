"""A session's ports (Session.port, AsyncSession.port): HTTP to a server
the session runs on its sandbox's loopback, through the daemon's
/v1/sessions/{id}/ports/{port}/ proxy, and a local TCP port forwarded to
it as `nsbox session port` does (docs/API.md, "Ports")."""

from __future__ import annotations

import asyncio
import http.client
import ipaddress
import json
import logging
import socket
import threading
from typing import Any, AsyncIterator, Dict, Iterator, List, Mapping, Optional, Set, Tuple

from . import _upgrade, _wire
from .errors import BY_CODE, DaemonUnreachable, InvalidArgument, NsboxError, RequestTimeout

__all__ = ["Port", "PortResponse", "Forward", "AsyncPort", "AsyncPortResponse", "AsyncForward"]

log = logging.getLogger("nsbox")

UPGRADE_TCP = "tcp"
_CHUNK = 64 << 10
# The daemon's own error answers on a port's route (docs/API.md, "Errors"):
# code -> status. An answer of the server in the sandbox is never raised,
# whatever its status: only one in exactly this JSON shape, status and
# code is taken for the daemon's.
_DAEMON_ERRORS = {
    "invalid_argument": 400, "forbidden": 403, "not_found": 404, "session_dead": 409, "session_busy": 409,
    "session_parked": 409, "payload_too_large": 413, "resource_exhausted": 429, "internal": 500,
    "bad_gateway": 502, "unavailable": 503,
}


def _invalid(message: str) -> InvalidArgument:
    return InvalidArgument("invalid_argument", message, 400)


def check_port(port: Any) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise _invalid("port %r: give a TCP port from 1 to 65535" % (port,))
    return port


def port_path(session_id: str, port: int) -> str:
    """The URL path of the port's route, without the trailing slash (the
    raw tunnel's)."""
    return "%s/ports/%d" % (_wire.session_path(session_id), port)


def request_path(base: str, path: str) -> str:
    if not isinstance(path, str) or not path.startswith("/"):
        raise _invalid("path %r: give the server's path from its root, e.g. \"/\" or \"/api?q=1\"" % (path,))
    if any(c in path for c in " \r\n\t\x00"):
        raise _invalid("path %r: quote spaces and control characters (urllib.parse.quote)" % (path,))
    return base + path


def daemon_error(status: int, content_type: Optional[str], body: bytes) -> Optional[NsboxError]:
    """The daemon's error, if this answer is one of its own (the session
    gone, nothing listening on the port), else None: an answer of the
    server, passed on as it came."""
    if not (content_type or "").startswith("application/json"):
        return None
    try:
        err = json.loads(body)["error"]
        code, message = err["code"], err["message"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(code, str) or not isinstance(message, str) or _DAEMON_ERRORS.get(code) != status:
        return None
    return BY_CODE.get(code, NsboxError)(code, message, status)


def split_listen(listen: str) -> Tuple[str, int]:
    """HOST:PORT of a loopback address ("127.0.0.1:0": any free port):
    a forwarded port lets any local user in, so it is never opened to the
    network, as `nsbox session port --listen`."""
    host, sep, port = listen.rpartition(":")
    host = host.strip("[]")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise _invalid("listen %r: want HOST:PORT, such as 127.0.0.1:8000 (127.0.0.1:0 for any free port)" % (listen,))
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise _invalid("listen %r: not a loopback address: a session's port is forwarded on this host only "
                           "(127.0.0.1 or ::1)" % (listen,))
    return host, int(port)


def url_of(addr: Tuple[Any, ...]) -> str:
    host = addr[0]
    return "http://%s:%d/" % ("[%s]" % host if ":" in host else host, addr[1])


class PortResponse:
    """The server's answer: status, reason, headers (case-insensitive);
    the body is read as it comes: read(), readline(), iteration (chunks as
    they arrive: server-sent events, a large download), or .body (all of
    it). Close it (or use it with `with`) when not reading it to the end."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse, what: str,
                 prefetched: Optional[bytes] = None):
        self._conn, self._resp, self._what = conn, resp, what
        self.status: int = resp.status
        self.reason: str = resp.reason
        self.headers = resp.headers
        self._prefetched = prefetched
        self._body: Optional[bytes] = None

    def __repr__(self) -> str:
        return "PortResponse(%d %s)" % (self.status, self.reason)

    def __enter__(self) -> PortResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _io(self, fn: Any, *args: Any) -> bytes:
        try:
            return fn(*args)
        except socket.timeout as e:
            raise RequestTimeout("timeout", "%s: the answer stalled" % self._what) from e
        except (OSError, http.client.HTTPException) as e:
            raise _wire.cut_off(*self._what.split(" ", 1)) from e

    def read(self, amt: Optional[int] = None) -> bytes:
        """Reads amt bytes of the body (None: the rest); b"" at its end."""
        if self._prefetched is not None:
            if amt is None:
                out, self._prefetched = self._prefetched, b""
            else:
                out, self._prefetched = self._prefetched[:amt], self._prefetched[amt:]
            return out
        return self._io(self._resp.read, amt)

    def readline(self) -> bytes:
        """One line of the body (an event-stream's), b"" at its end."""
        if self._prefetched is not None:
            line, sep, self._prefetched = self._prefetched.partition(b"\n")
            return line + sep
        return self._io(self._resp.readline)

    def __iter__(self) -> Iterator[bytes]:
        while True:
            if self._prefetched is not None:
                chunk = self.read()
                self._prefetched = None
                if chunk:
                    yield chunk
                continue
            chunk = self._io(self._resp.read1, _CHUNK)
            if not chunk:
                return
            yield chunk

    @property
    def body(self) -> bytes:
        """The whole body (read once, then kept); closes the connection."""
        if self._body is None:
            try:
                self._body = self.read()
            finally:
                self.close()
        return self._body

    def json(self) -> Any:
        return json.loads(self.body)

    def close(self) -> None:
        self._conn.close()


class Port:
    """A port of a session's sandbox (Session.port): its server's answers
    through the daemon (request), a raw connection to it (connect), or a
    local TCP port forwarded to it (forward)."""

    def __init__(self, client: Any, session_id: str, port: int):
        self.client = client
        self.session_id = session_id
        self.port = check_port(port)
        self._base = port_path(session_id, self.port)

    def __repr__(self) -> str:
        return "Port(%r, %d)" % (self.session_id, self.port)

    def request(self, method: str, path: str = "/", body: Any = None, headers: Optional[Mapping[str, str]] = None,
                timeout: Optional[float] = -1.0) -> PortResponse:
        """Sends an HTTP request to the server on the port and returns its
        answer once its head has come (the body is read from the answer as
        it comes). path: from the server's root, with its query ("/",
        "/api?q=1"). body: bytes, str (UTF-8), a file object or an
        iterable of bytes (sent chunked). timeout: seconds for each read
        (-1: the client's timeout; None: no limit). The daemon's own errors
        raise: BadGateway (nothing listens on the port), NotFound (no such
        session, or not the caller's), SessionDead, SessionParked; any
        answer of the server is returned, whatever its status."""
        url = request_path(self._base, path)
        what = "%s %s" % (method, url)
        if isinstance(body, str):
            body = body.encode("utf-8")
        timeout = self.client.timeout if timeout == -1.0 else timeout
        conn = self.client._connection(timeout)
        try:
            conn.connect()
        except OSError as e:
            conn.close()
            raise DaemonUnreachable("unreachable", _wire.unreachable_message(self.client.socket_path, e)) from e
        try:
            conn.request(method, url, body=body, headers=dict(headers or {}))
            resp = conn.getresponse()
            prefetched = None
            # The daemon's errors have a length; a server's streamed
            # answer is never read here.
            if resp.status in _DAEMON_ERRORS.values() and resp.length is not None and resp.length <= _CHUNK:
                prefetched = resp.read()
                err = daemon_error(resp.status, resp.getheader("Content-Type"), prefetched)
                if err is not None:
                    raise err
        except socket.timeout as e:
            conn.close()
            raise RequestTimeout("timeout", "%s: no answer within %ss" % (what, timeout)) from e
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise DaemonUnreachable("unreachable", _wire.unreachable_message(self.client.socket_path, e)) from e
        except BaseException:
            conn.close()
            raise
        return PortResponse(conn, resp, what, prefetched)

    def get(self, path: str = "/", headers: Optional[Mapping[str, str]] = None,
            timeout: Optional[float] = -1.0) -> PortResponse:
        """request("GET", path, ...)."""
        return self.request("GET", path, None, headers, timeout)

    def connect(self) -> socket.socket:
        """A connection to the port (a raw TCP tunnel through the daemon):
        a socket whose bytes go both ways as they would to the server
        itself; shutdown(SHUT_WR) half-closes. Close it when done."""
        sock, _ = _upgrade.open_sync(self.client, "GET", self._base, UPGRADE_TCP)
        return sock

    def forward(self, listen: str = "127.0.0.1:0") -> Forward:
        """Serves a local TCP port (listen: a loopback HOST:PORT; port 0
        any free one), each connection joined to a connection to this
        port, as `nsbox session port` does, until it is closed (use it with
        `with`). Its address and url say where it listens."""
        return Forward(self, listen)


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copies src to dst until src's end, then half-closes dst."""
    try:
        while True:
            data = src.recv(_CHUNK)
            if not data:
                break
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Forward:
    """A local TCP port forwarded to a session's port (Port.forward); each
    connection to it is a tunnel of its own. close() (or leaving its with
    block) stops it and closes its connections."""

    def __init__(self, port: Port, listen: str):
        host, number = split_listen(listen)
        self.port = port
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._ln = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._ln.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._ln.bind((host, number))
            self._ln.listen(128)
        except OSError as e:
            self._ln.close()
            raise _invalid("listen %r: %s (choose another, or 127.0.0.1:0 for any free port)" % (listen, e)) from e
        #: (host, port) it listens on.
        self.address: Tuple[str, int] = self._ln.getsockname()[:2]
        #: http://HOST:PORT/, for a browser or urllib.
        self.url = url_of(self.address)
        self._lock = threading.Lock()
        self._open: Set[socket.socket] = set()
        self._threads: List[threading.Thread] = []
        self._closed = False
        self._accept = threading.Thread(target=self._serve, name="nsbox-forward-%d" % port.port, daemon=True)
        self._accept.start()

    def __repr__(self) -> str:
        return "Forward(%s -> %r)" % (self.url, self.port)

    def __enter__(self) -> Forward:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _serve(self) -> None:
        while True:
            try:
                c, _ = self._ln.accept()
            except OSError:
                return  # closed
            t = threading.Thread(target=self._join, args=(c,), daemon=True)
            with self._lock:
                if self._closed:
                    c.close()
                    return
                self._open.add(c)
                self._threads = [x for x in self._threads if x.is_alive()] + [t]
            t.start()

    def _join(self, c: socket.socket) -> None:
        tunnel: Optional[socket.socket] = None
        try:
            try:
                tunnel = self.port.connect()
            except NsboxError as e:
                log.warning("nsbox: forwarding %s to %r: %s", self.url, self.port, e)
                return
            with self._lock:
                if self._closed:
                    return
                self._open.add(tunnel)
            back = threading.Thread(target=_pump, args=(tunnel, c), daemon=True)
            back.start()
            _pump(c, tunnel)
            back.join()
        finally:
            with self._lock:
                for s in (c, tunnel):
                    if s is not None:
                        self._open.discard(s)
                        s.close()

    def close(self) -> None:
        """Stops listening and closes every forwarded connection (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            conns, threads = list(self._open), list(self._threads)
        try:
            self._ln.shutdown(socket.SHUT_RDWR)  # wakes accept
        except OSError:
            pass
        self._ln.close()
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._accept.join()
        for t in threads:
            t.join()


class AsyncPortResponse:
    """The server's answer (AsyncPort.request), as nsbox.PortResponse with
    coroutine reads; iterate it with `async for` for its chunks."""

    def __init__(self, resp: Any, prefetched: Optional[bytes] = None):
        self._resp = resp
        self.status: int = resp.status
        self.headers: Dict[str, str] = resp.headers  # lower-case names
        self._prefetched = prefetched
        self._body: Optional[bytes] = None

    def __repr__(self) -> str:
        return "AsyncPortResponse(%d)" % self.status

    async def __aenter__(self) -> AsyncPortResponse:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    async def read(self) -> bytes:
        """The rest of the body."""
        if self._prefetched is not None:
            out, self._prefetched = self._prefetched, b""
            return out
        return await self._resp.read()

    async def readline(self) -> bytes:
        if self._prefetched is not None:
            line, sep, self._prefetched = self._prefetched.partition(b"\n")
            return line + sep
        return await self._resp.readline()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._prefetched is not None:
            out, self._prefetched = self._prefetched, None
            if out:
                yield out
            return
        if self._resp._buf:
            out, self._resp._buf = self._resp._buf, b""
            yield out
        while True:
            chunk = await self._resp._chunk()
            if not chunk:
                return
            yield chunk

    async def body(self) -> bytes:
        """The whole body (read once, then kept); closes the connection."""
        if self._body is None:
            try:
                self._body = await self.read()
            finally:
                self.close()
        return self._body

    async def json(self) -> Any:
        return json.loads(await self.body())

    def close(self) -> None:
        self._resp.close()


class AsyncPort:
    """A port of a session's sandbox (AsyncSession.port), as nsbox.Port
    with coroutine methods; a request's body is bytes or str."""

    def __init__(self, client: Any, session_id: str, port: int):
        self.client = client
        self.session_id = session_id
        self.port = check_port(port)
        self._base = port_path(session_id, self.port)

    def __repr__(self) -> str:
        return "AsyncPort(%r, %d)" % (self.session_id, self.port)

    async def request(self, method: str, path: str = "/", body: Any = None,
                      headers: Optional[Mapping[str, str]] = None, timeout: Optional[float] = -1.0) -> AsyncPortResponse:
        """As nsbox.Port.request (body: bytes or str)."""
        url = request_path(self._base, path)
        if isinstance(body, str):
            body = body.encode("utf-8")
        if body is not None and not isinstance(body, (bytes, bytearray)):
            raise TypeError("body: give bytes or str to AsyncPort.request, not %s" % type(body).__name__)
        timeout = self.client.timeout if timeout == -1.0 else timeout
        resp = await self.client._exchange(method, url, bytes(body or b""), dict(headers or {}), timeout, timeout, False)
        prefetched = None
        try:
            length = resp.headers.get("content-length", "")
            if resp.status in _DAEMON_ERRORS.values() and length.isdigit() and int(length) <= _CHUNK:
                prefetched = await resp.read()
                err = daemon_error(resp.status, resp.headers.get("content-type"), prefetched)
                if err is not None:
                    raise err
        except BaseException:
            resp.close()
            raise
        return AsyncPortResponse(resp, prefetched)

    async def get(self, path: str = "/", headers: Optional[Mapping[str, str]] = None,
                  timeout: Optional[float] = -1.0) -> AsyncPortResponse:
        return await self.request("GET", path, None, headers, timeout)

    async def connect(self) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """As nsbox.Port.connect: the tunnel's streams (write_eof half-closes)."""
        reader, writer, _ = await _upgrade.open_async(self.client, "GET", self._base, UPGRADE_TCP)
        return reader, writer

    async def forward(self, listen: str = "127.0.0.1:0") -> AsyncForward:
        """As nsbox.Port.forward; use it with `async with`."""
        f = AsyncForward(self)
        await f._start(listen)
        return f


async def _apump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            data = await reader.read(_CHUNK)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.close()


class AsyncForward:
    """A local TCP port forwarded to a session's port (AsyncPort.forward),
    as nsbox.Forward; close() is a coroutine."""

    def __init__(self, port: AsyncPort):
        self.port = port
        self.address: Tuple[str, int] = ("", 0)
        self.url = ""
        self._server: Optional[asyncio.AbstractServer] = None
        self._tasks: Set[asyncio.Task] = set()

    async def _start(self, listen: str) -> None:
        host, number = split_listen(listen)
        try:
            self._server = await asyncio.start_server(self._join, host, number)
        except OSError as e:
            raise _invalid("listen %r: %s (choose another, or 127.0.0.1:0 for any free port)" % (listen, e)) from e
        self.address = self._server.sockets[0].getsockname()[:2]
        self.url = url_of(self.address)

    def __repr__(self) -> str:
        return "AsyncForward(%s -> %r)" % (self.url, self.port)

    async def __aenter__(self) -> AsyncForward:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _join(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        treader: Optional[asyncio.StreamReader] = None
        twriter: Optional[asyncio.StreamWriter] = None
        try:
            try:
                treader, twriter = await self.port.connect()
            except NsboxError as e:
                log.warning("nsbox: forwarding %s to %r: %s", self.url, self.port, e)
                return
            await asyncio.gather(_apump(reader, twriter), _apump(treader, writer))
        except asyncio.CancelledError:
            pass
        finally:
            for w in (writer, twriter):
                if w is not None:
                    w.close()
            if task is not None:
                self._tasks.discard(task)

    async def close(self) -> None:
        """Stops listening and closes every forwarded connection."""
        if self._server is None:
            return
        server, self._server = self._server, None
        server.close()
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()
