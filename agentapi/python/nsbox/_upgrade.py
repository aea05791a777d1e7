"""Upgraded connections to the daemon (a terminal, a port's raw tunnel):
an HTTP/1.1 request whose answer is 101, after which the Unix socket
carries another protocol. Shared by the sync and asyncio clients; the
head is read without reading past it, so the socket is handed on clean."""

from __future__ import annotations

import asyncio
import json
import select
import socket
import time
from typing import Any, Dict, Optional, Tuple

from . import _wire
from .errors import DaemonUnreachable, NsboxError, RequestTimeout

_MAX_HEAD = 64 << 10
_MAX_ERROR_BODY = 1 << 20


def request_head(method: str, path: str, protocol: str, body: bytes, headers: Optional[Dict[str, str]] = None) -> bytes:
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: nsbox", "Connection: Upgrade", "Upgrade: " + protocol]
    if body:
        lines += ["Content-Type: application/json", "Content-Length: %d" % len(body)]
    lines += ["%s: %s" % kv for kv in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def parse_head(head: bytes, what: str) -> Tuple[int, Dict[str, str]]:
    """The status and headers (lower-case names) of an answer's head."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(None, 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise NsboxError("internal", "%s: not an HTTP/1.1 answer: %r" % (what, lines[0][:80]))
    hdrs: Dict[str, str] = {}
    for line in lines[1:]:
        k, sep, v = line.partition(":")
        if sep:
            hdrs[k.strip().lower()] = v.strip()
    return int(parts[1]), hdrs


def _upgraded(status: int, hdrs: Dict[str, str], protocol: str) -> bool:
    return status == 101 and hdrs.get("upgrade", "").lower() == protocol.lower()


def _body_length(hdrs: Dict[str, str]) -> Optional[int]:
    n = hdrs.get("content-length", "")
    return min(int(n), _MAX_ERROR_BODY) if n.isdigit() else None


def _refusal(status: int, hdrs: Dict[str, str], body: bytes, what: str, protocol: str) -> NsboxError:
    if status // 100 == 2 or status == 101:
        return NsboxError("internal", "%s: the daemon answered %d, not an upgrade to %s" % (what, status, protocol))
    return _wire.error_from(status, body, hdrs.get("retry-after"))


def _recv_head(sock: socket.socket, deadline: Optional[float], what: str) -> bytes:
    """Reads up to the blank line after the headers, and not a byte past
    it: what is there is peeked at (MSG_PEEK), and only the head taken."""
    head = b""
    while True:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([sock], [], [], left)[0]:
                raise socket.timeout()
        peek = sock.recv(_MAX_HEAD, socket.MSG_PEEK)
        if not peek:
            raise ConnectionError("it closed the connection without an answer")
        end = (head + peek).find(b"\r\n\r\n")
        if end >= 0:
            return head + _recv_exactly(sock, end + 4 - len(head))
        head += _recv_exactly(sock, len(peek))
        if len(head) >= _MAX_HEAD:
            raise NsboxError("internal", "%s: an answer's head longer than %d bytes" % (what, _MAX_HEAD))


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        b = sock.recv(n - len(out))
        if not b:
            raise ConnectionError("the connection closed mid-answer")
        out += b
    return out


def _recv_body(sock: socket.socket, hdrs: Dict[str, str]) -> bytes:
    n = _body_length(hdrs)
    out = b""
    while n is None or len(out) < n:
        b = sock.recv(65536 if n is None else n - len(out))
        if not b:
            break
        out += b
        if len(out) >= _MAX_ERROR_BODY:
            break
    return out


def open_sync(client: Any, method: str, path: str, protocol: str, body: Optional[Dict[str, Any]] = None,
              headers: Optional[Dict[str, str]] = None) -> Tuple[socket.socket, Dict[str, str]]:
    """Makes an upgraded connection for nsbox.Client: the socket (blocking,
    no timeout) and the 101's headers. Refusals raise the daemon's error;
    429 and 503 are retried as every request is."""
    data = json.dumps(body).encode("utf-8") if body is not None else b""
    what = "%s %s" % (method, path)
    waited, attempt = 0.0, 0
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(client.connect_timeout)
            s.connect(client.socket_path)
        except OSError as e:
            s.close()
            raise DaemonUnreachable("unreachable", _wire.unreachable_message(client.socket_path, e)) from e
        try:
            s.settimeout(client.timeout)
            deadline = None if client.timeout is None else time.monotonic() + client.timeout
            s.sendall(request_head(method, path, protocol, data, headers))
            status, hdrs = parse_head(_recv_head(s, deadline, what), what)
            if _upgraded(status, hdrs, protocol):
                s.settimeout(None)
                return s, hdrs
            err = _refusal(status, hdrs, _recv_body(s, hdrs), what, protocol)
        except socket.timeout as e:
            s.close()
            raise RequestTimeout("timeout", "%s: no answer from the nsbox daemon at %s within %ss" % (
                what, client.socket_path, client.timeout)) from e
        except NsboxError:
            s.close()
            raise
        except OSError as e:
            s.close()
            raise DaemonUnreachable("unreachable", _wire.unreachable_message(client.socket_path, e)) from e
        s.close()
        attempt += 1
        delay = client.retry.delay(attempt, err, waited)
        if delay is None:
            raise err
        time.sleep(delay)
        waited += delay


async def open_async(client: Any, method: str, path: str, protocol: str, body: Optional[Dict[str, Any]] = None,
                     headers: Optional[Dict[str, str]] = None,
                     ) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter, Dict[str, str]]:
    """open_sync for nsbox.AsyncClient: the upgraded connection's streams."""
    data = json.dumps(body).encode("utf-8") if body is not None else b""
    what = "%s %s" % (method, path)
    waited, attempt = 0.0, 0
    while True:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(client.socket_path, limit=_MAX_HEAD), client.connect_timeout)
        except asyncio.TimeoutError as e:
            raise DaemonUnreachable("unreachable", _wire.unreachable_message(
                client.socket_path, TimeoutError("connect timed out after %ss" % client.connect_timeout))) from e
        except OSError as e:
            raise DaemonUnreachable("unreachable", _wire.unreachable_message(client.socket_path, e)) from e
        try:
            writer.write(request_head(method, path, protocol, data, headers))
            await asyncio.wait_for(writer.drain(), client.timeout)
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), client.timeout)
            status, hdrs = parse_head(head, what)
            if _upgraded(status, hdrs, protocol):
                return reader, writer, hdrs
            n = _body_length(hdrs)
            err_body = await asyncio.wait_for(reader.readexactly(n) if n is not None else reader.read(_MAX_ERROR_BODY),
                                              client.timeout)
            err = _refusal(status, hdrs, err_body, what, protocol)
        except asyncio.TimeoutError as e:
            writer.close()
            raise RequestTimeout("timeout", "%s: no answer from the nsbox daemon at %s within %ss" % (
                what, client.socket_path, client.timeout)) from e
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError) as e:
            writer.close()
            raise DaemonUnreachable("unreachable", _wire.unreachable_message(client.socket_path, e)) from e
        except BaseException:
            writer.close()
            raise
        writer.close()
        attempt += 1
        delay = client.retry.delay(attempt, err, waited)
        if delay is None:
            raise err
        await asyncio.sleep(delay)
        waited += delay
