"""Tests of the retry policy: against a scripted HTTP server on a Unix
socket (to control 429/503 answers and Retry-After exactly), and against a
real daemon whose only session slot or run slot is taken
(NSBOX_SOCKET_ONE_SESSION: a daemon started with --max-sessions 1
--max-concurrent 1)."""

import asyncio
import json
import os
import socketserver
import tempfile
import threading
import time
import unittest

import nsbox
from nsbox import Client, Retry
from nsbox.aio import AsyncClient

ONE_SESSION = os.environ.get("NSBOX_SOCKET_ONE_SESSION")


class _Handler(socketserver.StreamRequestHandler):
    def handle(self):
        self.rfile.readline()
        length = 0
        while True:
            line = self.rfile.readline()
            if line in (b"\r\n", b""):
                break
            k, _, v = line.decode().partition(":")
            if k.strip().lower() == "content-length":
                length = int(v)
        self.rfile.read(length)
        srv = self.server
        with srv.lock:
            srv.times.append(time.monotonic())
            answer = srv.script.pop(0) if srv.script else srv.last
        if isinstance(answer, _Raw):
            try:
                for delay, data in answer.parts:
                    time.sleep(delay)
                    self.wfile.write(data)
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up first (its deadline)
            return
        status, headers, body = answer
        head = "HTTP/1.1 %d X\r\nContent-Length: %d\r\nConnection: close\r\n" % (status, len(body))
        head += "".join("%s: %s\r\n" % kv for kv in headers.items())
        self.wfile.write(head.encode() + b"\r\n" + body)


class _Raw:
    """An answer written as it is, after delay seconds (then each of more's
    (delay, data) parts), then the connection closes."""

    def __init__(self, data, delay=0.0, more=()):
        self.parts = [(delay, data)] + list(more)


def _chunk(ev):
    line = json.dumps(ev).encode() + b"\n"
    return b"%x\r\n%s\r\n" % (len(line), line)


_NDJSON_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"


def _chunked(*events, end=True):
    """A 200 NDJSON answer in chunked encoding, one chunk per event, as the
    daemon streams; end=False cuts it off after the events."""
    out = _NDJSON_HEAD + b"".join(_chunk(ev) for ev in events)
    return _Raw(out + (b"0\r\n\r\n" if end else b""))


def _run_answer(queued=0.0, running=0.0):
    """A run's NDJSON answer as the daemon gives it: nothing while it waits
    queued seconds for a run slot, then the head and its start event, then
    its result running seconds later."""
    return _Raw(_NDJSON_HEAD + _chunk({"type": "start", "id": "r1"}), queued,
                [(running, _chunk({"type": "result", "result": {"status": "ok", "stdout": "42\n"}}) + b"0\r\n\r\n")])


def _json(obj, delay=0.0):
    body = json.dumps(obj).encode()
    return _Raw(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body), body), delay)


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def _busy(retry_after=None, status=429):
    code = "resource_exhausted" if status == 429 else "unavailable"
    headers = {"Content-Type": "application/json"}
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return status, headers, json.dumps({"error": {"code": code, "message": "busy"}}).encode()


_OK = (200, {"Content-Type": "application/json"}, b'{"status":"ok","api_version":"v1"}')


class ScriptedTest(unittest.TestCase):
    def serve(self, *script):
        d = tempfile.mkdtemp()
        self.addCleanup(os.rmdir, d)
        path = os.path.join(d, "s.sock")
        srv = _Server(path, _Handler)
        srv.script, srv.last, srv.times, srv.lock = list(script), _OK, [], threading.Lock()
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(os.unlink, path)
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        return srv, path

    def test_retry_after_is_honoured(self):
        srv, path = self.serve(_busy(1), _busy(None, 503))
        t0 = time.monotonic()
        self.assertEqual(Client(socket_path=path).health()["status"], "ok")
        self.assertEqual(len(srv.times), 3)
        self.assertGreaterEqual(srv.times[1] - srv.times[0], 1.0, "Retry-After: 1 waits at least a second")
        self.assertLess(time.monotonic() - t0, 10)

    def test_backoff_without_retry_after(self):
        srv, path = self.serve(_busy(), _busy(), _busy())
        c = Client(socket_path=path, retries=Retry(attempts=3, backoff=0.05, max_backoff=0.2))
        self.assertEqual(c.health()["status"], "ok")
        self.assertEqual(len(srv.times), 4)

    def test_opt_out(self):
        srv, path = self.serve(_busy(1))
        with self.assertRaises(nsbox.ResourceExhausted) as cm:
            Client(socket_path=path, retries=0).health()
        self.assertEqual((cm.exception.status, cm.exception.retry_after), (429, 1))
        self.assertEqual(len(srv.times), 1)

    def test_gives_up(self):
        # attempts bounds the retries; max_wait bounds the waiting.
        srv, path = self.serve(*[_busy(None, 503)] * 10)
        with self.assertRaises(nsbox.Unavailable):
            Client(socket_path=path, retries=Retry(attempts=2, backoff=0.01)).health()
        self.assertEqual(len(srv.times), 3)
        srv2, path2 = self.serve(_busy(30))
        t0 = time.monotonic()
        with self.assertRaises(nsbox.ResourceExhausted):
            Client(socket_path=path2, retries=Retry(max_wait=5)).health()
        self.assertLess(time.monotonic() - t0, 5, "a Retry-After past max_wait is not waited for")
        self.assertEqual(len(srv2.times), 1)

    def test_other_errors_are_not_retried(self):
        srv, path = self.serve((400, {}, b'{"error":{"code":"invalid_argument","message":"no"}}'))
        with self.assertRaises(nsbox.InvalidArgument):
            Client(socket_path=path).health()
        self.assertEqual(len(srv.times), 1)

    def test_async(self):
        srv, path = self.serve(_busy(1), _busy())

        async def go():
            return await AsyncClient(socket_path=path).health()

        self.assertEqual(asyncio.run(go())["status"], "ok")
        self.assertEqual(len(srv.times), 3)
        self.assertGreaterEqual(srv.times[1] - srv.times[0], 1.0)
        srv2, path2 = self.serve(_busy(1))

        async def off():
            return await AsyncClient(socket_path=path2, retries=0).health()

        with self.assertRaises(nsbox.ResourceExhausted):
            asyncio.run(off())


    def test_stream_retried_before_it_starts(self):
        # A 429 comes before any event: the streamed run is sent again.
        events = ({"type": "start", "id": "r1"}, {"type": "stdout", "data": "a\n"},
                  {"type": "stderr", "data": "b\n"},
                  {"type": "result", "result": {"status": "ok", "stdout": "a\n", "stderr": "b\n"}})
        limits = {"timeout_ms": 5000}
        srv, path = self.serve(_busy(None), _chunked(*events), _busy(None), _chunked(*events))
        out, err = [], []
        r = Client(socket_path=path, retries=Retry(backoff=0.01)).run(
            code="x", limits=limits, on_stdout=out.append, on_stderr=err.append)
        self.assertEqual((r.status, out, err), ("ok", ["a\n"], ["b\n"]))
        self.assertEqual(len(srv.times), 2)

        async def go():
            aout = []
            r = await AsyncClient(socket_path=path, retries=Retry(backoff=0.01)).run(
                code="x", limits=limits, on_stdout=aout.append)
            return r, aout

        r, aout = asyncio.run(go())
        self.assertEqual((r.status, aout), ("ok", ["a\n"]))
        self.assertEqual(len(srv.times), 4)

    def test_cut_off_stream_is_not_retried(self):
        # Once an event has come the run has started: a stream that breaks
        # is an error, never sent again (the code may have had effects).
        cut = _chunked({"type": "start", "id": "r1"}, {"type": "stdout", "data": "a\n"}, end=False)
        srv, path = self.serve(cut, cut)
        out = []
        with self.assertRaisesRegex(nsbox.NsboxError, "mid-answer") as cm:
            Client(socket_path=path).run(code="x", limits={"timeout_ms": 5000}, on_stdout=out.append)
        self.assertNotIsInstance(cm.exception, nsbox.DaemonUnreachable)
        self.assertEqual((out, len(srv.times)), (["a\n"], 1))

        async def go():
            await AsyncClient(socket_path=path).run(code="x", limits={"timeout_ms": 5000}, on_stdout=print)

        with self.assertRaisesRegex(nsbox.NsboxError, "mid-answer"):
            asyncio.run(go())
        self.assertEqual(len(srv.times), 2)

    def test_stream_error_event(self):
        # The daemon's last event when the sandbox could not be set up: the
        # typed error of its code, not retried.
        answer = _chunked({"type": "start", "id": "r1"},
                          {"type": "error", "error": {"code": "internal", "message": "no cgroup"}})
        srv, path = self.serve(answer, answer)
        with self.assertRaisesRegex(nsbox.InternalError, "no cgroup"):
            Client(socket_path=path).run(code="x", limits={"timeout_ms": 5000}, on_stdout=print)

        async def go():
            await AsyncClient(socket_path=path).run(code="x", limits={"timeout_ms": 5000}, on_stderr=print)

        with self.assertRaisesRegex(nsbox.InternalError, "no cgroup"):
            asyncio.run(go())
        self.assertEqual(len(srv.times), 2)

    def test_cut_off_body(self):
        # A Content-Length answer cut short: the client's error, not
        # http.client's IncompleteRead.
        cut = _Raw(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"sta")
        srv, path = self.serve(cut, cut)
        with self.assertRaisesRegex(nsbox.NsboxError, "GET /v1/health: the daemon closed the connection mid-answer"):
            Client(socket_path=path).health()

        async def go():
            await AsyncClient(socket_path=path).health()

        with self.assertRaisesRegex(nsbox.NsboxError, "GET /v1/health: the daemon closed the connection mid-answer"):
            asyncio.run(go())
        self.assertEqual(len(srv.times), 2)

    def test_deadline_follows_the_profile(self):
        # A run that names no timeout_ms gets its profile's time limit (not
        # the daemon's default) plus the client's timeout as its deadline.
        # The client's timeout (2 s) is also what /v1/info has to answer
        # in, on a loaded machine too; the run the default deadline must
        # cut off answers only after a minute.
        info = {"default_limits": {"timeout_ms": 100},
                "profiles": [{"name": "slow", "limits": {"timeout_ms": 60000}}]}
        for make in (Client, AsyncClient):
            with self.subTest(client=make.__name__):
                srv, path = self.serve(_json(info), _run_answer(running=3.0), _run_answer(running=60.0))
                c = make(socket_path=path, timeout=2.0)

                def call(**kw):
                    r = c.run(code="x", **kw)
                    return asyncio.run(r) if asyncio.iscoroutine(r) else r

                self.assertEqual(call(profile="slow").status, "ok")  # 3 s under 60 s + 2 s
                with self.assertRaises(nsbox.RequestTimeout):
                    call()  # the default: 0.1 s + 2 s
                self.assertEqual(len(srv.times), 3, "/v1/info is read once")

    def test_queue_wait_is_not_the_runs_deadline(self):
        # A run that waits in the daemon's queue longer than its own time
        # limit plus the margin still gets its answer: its deadline counts
        # from its start. queue_timeout bounds the wait.
        for make in (Client, AsyncClient):
            with self.subTest(client=make.__name__):
                srv, path = self.serve(_run_answer(queued=1.0), _run_answer(queued=1.0))

                def call(**kw):
                    r = make(socket_path=path, timeout=0.3, **kw).run(code="x", limits={"timeout_ms": 100})
                    return asyncio.run(r) if asyncio.iscoroutine(r) else r

                res = call()
                self.assertEqual((res.status, res.stdout), ("ok", "42\n"), "queued 1 s under a 0.4 s run deadline")
                with self.assertRaisesRegex(nsbox.RequestTimeout, "did not start within 0.5s.*queued for a run slot.*queue_timeout"):
                    call(queue_timeout=0.2)


@unittest.skipUnless(ONE_SESSION, "set NSBOX_SOCKET_ONE_SESSION to a daemon started with --max-sessions 1 --max-concurrent 1")
class DaemonRetryTest(unittest.TestCase):
    """The daemon's own 429: its only session slot is taken; a second
    session is retried until the first one ends."""

    def test_session_waits_for_a_slot(self):
        c = Client(socket_path=ONE_SESSION)
        first = c.session()
        with self.assertRaises(nsbox.ResourceExhausted) as cm:
            Client(socket_path=ONE_SESSION, retries=0).session()
        self.assertEqual(cm.exception.status, 429)
        self.assertIsNotNone(cm.exception.retry_after)
        closer = threading.Timer(0.5, first.close)
        closer.start()
        try:
            with Client(socket_path=ONE_SESSION, retries=Retry(attempts=10, max_wait=30)).session() as second:
                self.assertTrue(second.exec("1").ok)
        finally:
            closer.cancel()
            first.close()

    def test_queued_run_gets_its_answer(self):
        # The daemon has one run slot (--max-concurrent 1): a run queued
        # behind a 2 s one waits longer than its own deadline (0.5 s + the
        # 0.3 s margin) and still gets its answer.
        busy = threading.Thread(target=lambda: Client(socket_path=ONE_SESSION).run(code="import time; time.sleep(2)"))
        busy.start()
        try:
            # The busy run holds the slot (in flight) before the second is
            # sent: then the second waits at least its 2 s sleep.
            admin = Client(socket_path=ONE_SESSION)
            deadline = time.monotonic() + 60
            while admin.info().get("in_flight", 0) < 1:
                self.assertLess(time.monotonic(), deadline, "the busy run never took the slot")
                time.sleep(0.01)
            t0 = time.monotonic()
            res = Client(socket_path=ONE_SESSION, timeout=0.3).run(code="print(6 * 7)", limits={"timeout_ms": 500})
            self.assertEqual((res.status, res.stdout), ("ok", "42\n"))
            self.assertGreater(time.monotonic() - t0, 0.8, "it should have waited for the slot")
        finally:
            busy.join()

    def test_async_session_waits_for_a_slot(self):
        async def go():
            c = AsyncClient(socket_path=ONE_SESSION)
            first = await c.session()
            loop = asyncio.get_running_loop()
            loop.call_later(0.5, lambda: asyncio.ensure_future(first.close()))
            async with await AsyncClient(socket_path=ONE_SESSION, retries=Retry(attempts=10, max_wait=30)).session() as s:
                return (await s.exec("6 * 7")).value

        self.assertEqual(asyncio.run(go()), "42")


if __name__ == "__main__":
    unittest.main()
