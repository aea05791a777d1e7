"""Tests of the asyncio client (nsbox.AsyncClient) against a real daemon
(NSBOX_SOCKET), as tests/test_client.py tests the synchronous one."""

import asyncio
import os
import tempfile
import time
import unittest

import nsbox
from nsbox import AsyncClient

SOCKET = os.environ.get("NSBOX_SOCKET")


def run(coro):
    return asyncio.run(coro)


@unittest.skipUnless(SOCKET, "set NSBOX_SOCKET to a running nsbox daemon's socket")
class AsyncClientTest(unittest.TestCase):
    def setUp(self):
        self.c = AsyncClient(socket_path=SOCKET)

    def test_session_watch(self):
        async def go():
            async with await self.c.session(processes=True) as s:
                await s.exec("import os; os.makedirs('w')")
                async with await s.watch("w") as w:
                    await s.exec("import os\nopen('w/a', 'w').close()\nos.remove('w/a')\nos.rmdir('w')")
                    return w.path, [(e["type"], e["name"]) async for e in w]

        path, got = run(go())
        self.assertEqual(path, "/workspace/w")
        self.assertEqual(got, [("create", "a"), ("remove", "a"), ("remove", ".")])

    def test_health_run(self):
        async def go():
            h = await self.c.health()
            r = await self.c.run(code="print('hi')\n6 * 7")
            a = await self.c.run(argv=["sh", "-c", "cat in.txt; exit 3"], files={"in.txt": b"bytes"})
            return h, r, a

        h, r, a = run(go())
        self.assertEqual(h["status"], "ok")
        self.assertTrue(r.ok, r.raw)
        self.assertEqual((r.stdout, r.value), ("hi\n", "42"))
        self.assertEqual((a.status, a.exit_code, a.stdout), ("exit_nonzero", 3, "bytes"))

    def test_streaming_sync_and_async_callbacks(self):
        out, err = [], []

        async def on_err(text):
            await asyncio.sleep(0)
            err.append(text)

        async def go():
            return await self.c.run(code="import sys, time\nprint('a', flush=True)\ntime.sleep(0.2)\n"
                                         "print('b', file=sys.stderr, flush=True)\nprint('c')",
                                    on_stdout=out.append, on_stderr=on_err)

        r = run(go())
        self.assertTrue(r.ok, r.raw)
        self.assertEqual(("".join(out), "".join(err)), ("a\nc\n", "b\n"))

    def test_concurrent_runs(self):
        # Many runs at once on one event loop; the daemon queues past its
        # slots and the client retries a 429.
        async def go():
            return await asyncio.gather(*(self.c.run(code="print(%d)" % i) for i in range(8)))

        results = run(go())
        self.assertEqual([r.stdout for r in results], ["%d\n" % i for i in range(8)])

    def test_session(self):
        async def go():
            async with await self.c.session(files={"seed.txt": "seed"}) as s:
                await s.exec("x = 41")
                v = (await s.exec("x + 1")).value
                exc = (await s.exec("1 / 0")).exception["name"]
                timeout = (await s.exec("while True: pass", timeout_ms=2000)).status  # after the cell started
                alive = (await s.exec("x")).value
                chunks = []
                await s.exec("for i in range(3): print(i, flush=True)", on_stdout=chunks.append)
                blob = bytes(range(256)) * 40
                await s.upload("d/blob.bin", blob)
                back = await s.download("d/blob.bin")
                files = {f["path"] for f in await s.files()}
                await s.delete_file("d/blob.bin")
                with self.assertRaises(nsbox.NotFound):
                    await s.download("d/blob.bin")
                with self.assertRaises(nsbox.InvalidArgument):
                    await s.download("../etc/passwd")
                paused = (await s.pause())["state"]
                resumed = (await s.resume())["state"]
                self.assertEqual((paused, resumed), ("paused", "idle"))
                state = (await s.info())["state"]
            listed = [x["id"] for x in await self.c.sessions()]
            return s, v, exc, timeout, alive, "".join(chunks), back == blob, files, state, listed

        s, v, exc, timeout, alive, out, same, files, state, listed = run(go())
        self.assertEqual((v, exc, timeout, alive, out), ("42", "ZeroDivisionError", "timeout", "41", "0\n1\n2\n"))
        self.assertTrue(same)
        self.assertTrue({"seed.txt", "d", "d/blob.bin"} <= files, files)
        self.assertEqual(state, "idle")
        self.assertNotIn(s.id, listed, "closed by async with")

    def test_run_batch(self):
        async def go():
            seen = []

            async def note(i, r):
                seen.append(i)

            b = await self.c.run_batch([{"code": "print(%d)" % i} for i in range(10)], on_item=note)
            self.assertEqual(sorted(seen), list(range(10)))
            self.assertTrue(b.ok)
            self.assertEqual([r.stdout for r in b.results], ["%d\n" % i for i in range(10)])

        run(go())

    def test_errors(self):
        async def go():
            with self.assertRaises(nsbox.InvalidArgument) as cm:
                await self.c.run(code="1", limits={"memory_bytes": -1})
            self.assertIn("memory_bytes", cm.exception.message)
            with self.assertRaises(nsbox.NotFound):
                await nsbox.AsyncSession(self.c, "0000000000000000").exec("1")
            with self.assertRaisesRegex(TypeError, "code must be a str"):
                await self.c.run(code=42)
            with tempfile.TemporaryDirectory() as d:
                with self.assertRaises(nsbox.DaemonUnreachable) as cm:
                    await AsyncClient(socket_path=os.path.join(d, "none.sock")).health()
                self.assertIn("systemctl start nsbox.socket", str(cm.exception))
            # The deadline cuts the request off: it never waits out the
            # minute the run would take (a bound only that meets).
            c = AsyncClient(socket_path=SOCKET, timeout=0.2)
            t0 = time.monotonic()
            with self.assertRaises(nsbox.RequestTimeout):
                await c._json("POST", "/v1/runs", {"argv": ["sleep", "60"]}, deadline=0.2)
            self.assertLess(time.monotonic() - t0, 30)
            self.assertTrue((await c.run(argv=["sleep", "0.5"], limits={"timeout_ms": 5000})).ok)

            # A body over the daemon's cap gets its 413 before it is sent
            # (100 Continue); a big one under it goes through.
            big = b"x" * ((64 << 20) + 1)
            with self.assertRaisesRegex(nsbox.PayloadTooLarge, "64 MiB"):
                await self.c.run(code="1", files={"big.bin": big})
            s = await self.c.session()
            try:
                with self.assertRaises(nsbox.PayloadTooLarge):
                    await s.upload("big.bin", big)
                await s.upload("mid.bin", big[: 20 << 20])
                self.assertEqual(len(await s.download("mid.bin")), 20 << 20)
            finally:
                await s.close()

        run(go())


if __name__ == "__main__":
    unittest.main()
