"""Tests of Session.port and AsyncSession.port against a real daemon
(NSBOX_SOCKET): `python3 -m http.server` and an echo server in a session,
reached through request() (the server's answers, any status, streamed),
connect() (a raw tunnel) and forward() (a local TCP port, with urllib);
the daemon's own errors; and another uid refused (NSBOX_OTHER_UID: the
harness opens the socket to it)."""

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import unittest
import urllib.error
import urllib.request

import nsbox
from nsbox import AsyncClient, Client
from nsbox.ports import daemon_error, split_listen

SOCKET = os.environ.get("NSBOX_SOCKET")
OTHER_UID = os.environ.get("NSBOX_OTHER_UID")
WAIT = 60  # seconds: only a hang takes this long

BIG = bytes(range(256)) * 12288  # 3 MiB

# Starts a server in the session and returns once it accepts connections.
SERVE = """import socket, subprocess, sys, time
srv = subprocess.Popen({argv!r}, cwd={cwd!r}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
deadline = time.monotonic() + 60
while True:
    try:
        socket.create_connection(("127.0.0.1", {port}), 1).close()
        break
    except OSError:
        if time.monotonic() > deadline or srv.poll() is not None:
            raise
        time.sleep(0.05)
"""

# A server that answers every request with what it got: method, path, a
# header and the body.
ECHO = """import http.server, os, time
class H(http.server.BaseHTTPRequestHandler):
    def answer(self):
        if self.path == "/held":
            # A 404 in JSON of no stated length, whose end waits for the
            # client's go (a file): it must reach the client as it comes.
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"error": {"code": "not_found", "message": "first"}}\\n')
            self.wfile.flush()
            deadline = time.monotonic() + 120
            while not os.path.exists("/workspace/go") and time.monotonic() < deadline:
                time.sleep(0.05)
            self.wfile.write(b"end")
            return
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        out = ("%s %s %s %d\\n" % (self.command, self.path, self.headers.get("X-Test"), n)).encode() + body
        self.send_response(201)
        self.send_header("Content-Length", str(len(out)))
        self.send_header("X-Echo", "yes")
        self.end_headers()
        self.wfile.write(out)
    do_GET = do_POST = do_PUT = answer
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", 8001), H).serve_forever()
"""


def serve(s, argv, port, cwd="/workspace"):
    r = s.exec(SERVE.format(argv=argv, port=port, cwd=cwd))
    assert r.ok, r.raw


def serve_site(s):
    s.upload("site/hello.txt", "hello from the sandbox\n")
    s.upload("site/big.bin", BIG)
    serve(s, ["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1"], 8000, "/workspace/site")


@unittest.skipUnless(SOCKET, "set NSBOX_SOCKET to a running nsbox daemon's socket")
class PortTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.nsbox = Client(socket_path=SOCKET)
        cls.s = cls.nsbox.session()
        serve_site(cls.s)
        cls.s.upload("echo.py", ECHO)
        serve(cls.s, ["python3", "echo.py"], 8001)

    @classmethod
    def tearDownClass(cls):
        cls.s.close()

    def test_request(self):
        p = self.s.port(8000)
        r = p.get("/hello.txt")
        self.assertEqual((r.status, r.body), (200, b"hello from the sandbox\n"))
        self.assertEqual(r.headers["content-type"], "text/plain")
        # The server's own errors are answers, not exceptions.
        r = p.get("/missing")
        self.assertEqual(r.status, 404)
        self.assertIn(b"File not found", r.body)
        r = p.request("DELETE", "/hello.txt")
        self.assertEqual(r.status, 501)
        r.close()

    def test_body_streams(self):
        with self.s.port(8000).get("/big.bin") as r:
            self.assertEqual(int(r.headers["Content-Length"]), len(BIG))
            chunks = list(r)
        self.assertEqual(b"".join(chunks), BIG)
        self.assertGreater(len(chunks), 1, "the body came in one piece: not streamed")
        with self.s.port(8000).get("/big.bin") as r:
            self.assertEqual(r.read(10), BIG[:10])
            self.assertEqual(r.read(), BIG[10:])

    def test_request_body_and_headers(self):
        p = self.s.port(8001)
        r = p.request("POST", "/api?q=1", body=b"\x00\x01payload", headers={"X-Test": "t1"})
        self.assertEqual((r.status, r.headers["X-Echo"]), (201, "yes"))
        self.assertEqual(r.body, b"POST /api?q=1 t1 9\n\x00\x01payload")
        self.assertEqual(p.request("PUT", "/x", body="héllo").body, "PUT /x None 6\nhéllo".encode())

    def test_server_answer_streams(self):
        # Even an answer shaped as the daemon's error is the server's when
        # it streams: read as it comes, never held for a look.
        with self.s.port(8001).get("/held", timeout=WAIT) as r:
            self.assertEqual(r.status, 404)
            self.assertEqual(r.readline(), b'{"error": {"code": "not_found", "message": "first"}}\n')
            self.s.upload("go", "")
            self.assertEqual(r.read(), b"end")

    def test_daemon_errors(self):
        with self.assertRaises(nsbox.BadGateway) as cm:
            self.s.port(8009).get("/")
        self.assertIn("8009", cm.exception.message)
        with self.assertRaises(nsbox.InvalidArgument):
            self.s.port(0)
        with self.assertRaises(nsbox.InvalidArgument):
            self.s.port(8000).get("no-slash")
        with self.assertRaises(nsbox.NotFound):
            nsbox.Session(self.nsbox, "0000000000000000").port(8000).get("/")
        with self.assertRaises(nsbox.NotFound):
            nsbox.Session(self.nsbox, "0000000000000000").port(8000).connect()

    def test_connect(self):
        c = self.s.port(8000).connect()
        try:
            c.sendall(b"GET /hello.txt HTTP/1.0\r\n\r\n")
            c.shutdown(socket.SHUT_WR)
            got = b""
            c.settimeout(WAIT)
            while True:
                b = c.recv(65536)
                if not b:
                    break
                got += b
        finally:
            c.close()
        self.assertTrue(got.startswith(b"HTTP/1.0 200"), got[:40])
        self.assertTrue(got.endswith(b"\r\n\r\nhello from the sandbox\n"), got[-60:])

    def test_forward(self):
        with self.s.port(8000).forward() as f:
            self.assertEqual(f.address[0], "127.0.0.1")
            self.assertEqual(f.url, "http://127.0.0.1:%d/" % f.address[1])
            with urllib.request.urlopen(f.url + "hello.txt", timeout=WAIT) as r:
                self.assertEqual(r.read(), b"hello from the sandbox\n")
            with urllib.request.urlopen(f.url + "big.bin", timeout=WAIT) as r:
                self.assertEqual(r.read(), BIG)
            with self.assertRaises(urllib.error.HTTPError) as cm:
                urllib.request.urlopen(f.url + "missing", timeout=WAIT)
            self.assertEqual(cm.exception.code, 404)
            addr = f.address
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(addr, WAIT).close()

    def test_forward_to_nothing(self):
        # A tunnel that cannot be made closes its local connection.
        with self.s.port(8009).forward("127.0.0.1:0") as f:
            with self.assertLogs("nsbox", "WARNING") as logs:
                with self.assertRaises((urllib.error.URLError, ConnectionError)):
                    urllib.request.urlopen(f.url, timeout=WAIT)
        self.assertIn("8009", "\n".join(logs.output))

    def test_forward_loopback_only(self):
        for listen in ("0.0.0.0:0", "192.0.2.1:80", "example.com:80", "8000", "127.0.0.1:x"):
            with self.assertRaises(nsbox.InvalidArgument, msg=listen):
                self.s.port(8000).forward(listen)


@unittest.skipUnless(SOCKET, "set NSBOX_SOCKET to a running nsbox daemon's socket")
class AsyncPortTest(unittest.TestCase):
    def test_request_forward(self):
        async def go():
            c = AsyncClient(socket_path=SOCKET)
            async with await c.session() as s:
                await s.upload("site/hello.txt", "hello async\n")
                await s.upload("site/big.bin", BIG)
                r = await s.exec(SERVE.format(argv=["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1"],
                                              port=8000, cwd="/workspace/site"))
                assert r.ok, r.raw
                p = s.port(8000)
                hello = await p.get("/hello.txt")
                hello = (hello.status, hello.headers["content-type"], await hello.body())
                missing = await p.get("/missing")
                missing_status = missing.status
                missing.close()
                async with await p.get("/big.bin") as big:
                    chunks = [b async for b in big]
                try:
                    await s.port(8009).get("/")
                    bad = None
                except nsbox.BadGateway as e:
                    bad = e
                reader, writer = await p.connect()
                writer.write(b"GET /hello.txt HTTP/1.0\r\n\r\n")
                raw = await asyncio.wait_for(reader.read(), WAIT)
                writer.close()
                async with await p.forward() as f:
                    loop = asyncio.get_running_loop()
                    fwd = await loop.run_in_executor(
                        None, lambda: urllib.request.urlopen(f.url + "hello.txt", timeout=WAIT).read())
                    addr = f.address
                return hello, missing_status, chunks, bad, raw, fwd, addr

        hello, missing, chunks, bad, raw, fwd, addr = asyncio.run(go())
        self.assertEqual(hello, (200, "text/plain", b"hello async\n"))
        self.assertEqual(missing, 404)
        self.assertEqual(b"".join(chunks), BIG)
        self.assertGreater(len(chunks), 1)
        self.assertIsInstance(bad, nsbox.BadGateway)
        self.assertTrue(raw.startswith(b"HTTP/1.0 200") and raw.endswith(b"hello async\n"), raw[:40])
        self.assertEqual(fwd, b"hello async\n")
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(addr, WAIT).close()


# What the other uid tries, with the package copied where it may read it.
OTHER = """import sys
import nsbox
s = nsbox.Session(nsbox.Client(socket_path=sys.argv[1]), sys.argv[2])
for name, attempt in [("terminal", lambda: s.terminal(["/bin/sh"])), ("request", lambda: s.port(8000).get("/")),
                      ("connect", lambda: s.port(8000).connect())]:
    try:
        attempt()
        print(name, "opened")
    except nsbox.NotFound:
        print(name, "refused")
"""


@unittest.skipUnless(SOCKET and OTHER_UID, "set NSBOX_OTHER_UID to a uid that may use NSBOX_SOCKET (tests/integration does)")
class OtherUidTest(unittest.TestCase):
    def test_refused(self):
        # The session's terminal and port are its owner's: another local
        # user who can reach the socket gets 404, as on every route of it.
        c = Client(socket_path=SOCKET)
        with c.session(processes=True) as s:
            serve_site(s)
            with s.terminal(["/bin/sh", "-c", "exit 0"]) as t:
                self.assertEqual(t.wait(timeout=WAIT), 0)  # the owner may
            with s.port(8000).get("/hello.txt") as r:
                self.assertEqual(r.status, 200)
            # Under /tmp, which any uid may enter (TMPDIR may be private).
            d = tempfile.mkdtemp(dir="/tmp" if os.path.isdir("/tmp") else None)
            try:
                os.chmod(d, 0o755)
                shutil.copytree(os.path.dirname(nsbox.__file__), os.path.join(d, "nsbox"))
                uid = int(OTHER_UID)
                # Debian's python3: a venv's may be where the uid cannot go.
                py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3"
                out = subprocess.run([py, "-c", OTHER, SOCKET, s.id],
                                     env={"PYTHONPATH": d, "PYTHONDONTWRITEBYTECODE": "1", "PATH": os.environ.get("PATH", "")},
                                     user=uid, group=uid, extra_groups=[], cwd=d, capture_output=True, text=True,
                                     timeout=WAIT)
            finally:
                shutil.rmtree(d)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.split("\n"), ["terminal refused", "request refused", "connect refused", ""],
                         out.stderr)


class WireTest(unittest.TestCase):
    """The ports' checks and the daemon's errors told from the server's,
    without a daemon."""

    def test_daemon_error(self):
        body = b'{"error": {"code": "bad_gateway", "message": "port 8000: nothing"}}'
        self.assertIsInstance(daemon_error(502, "application/json", body), nsbox.BadGateway)
        self.assertIsInstance(daemon_error(404, "application/json", body.replace(b"bad_gateway", b"not_found")),
                              nsbox.NotFound)
        # The server's answers: another shape, status or type.
        self.assertIsNone(daemon_error(502, "text/html", body))
        self.assertIsNone(daemon_error(404, "application/json", body))
        self.assertIsNone(daemon_error(404, "application/json", b'{"error": "not found"}'))
        self.assertIsNone(daemon_error(404, "application/json", b"[]"))

    def test_listen(self):
        self.assertEqual(split_listen("127.0.0.1:0"), ("127.0.0.1", 0))
        self.assertEqual(split_listen("[::1]:8080"), ("::1", 8080))
        self.assertEqual(split_listen("localhost:80"), ("localhost", 80))
        for bad in ("0.0.0.0:80", "10.0.0.1:80", ":80", "127.0.0.1", "127.0.0.1:99999"):
            with self.assertRaises(nsbox.InvalidArgument, msg=bad):
                split_listen(bad)


if __name__ == "__main__":
    unittest.main()
