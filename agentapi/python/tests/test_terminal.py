"""Tests of Session.terminal and AsyncSession.terminal against a real daemon
(NSBOX_SOCKET): a shell on a terminal of the session's sandbox, its size
and a resize seen by stty, what is typed echoed, Ctrl-C ending a
foreground sleep and not the shell, signals, the exit code, refusals,
and output left unread (bounded on both sides)."""

import asyncio
import os
import struct
import unittest

import nsbox
from nsbox import AsyncClient, Client
from nsbox.terminal import MAX_PAYLOAD, Frames, signal_frame, terminal_body

SOCKET = os.environ.get("NSBOX_SOCKET")
SHELL = ["/bin/bash", "--norc", "--noprofile", "-i"]
ENV = {"PS1": "$ "}
WAIT = 60  # seconds: only a hang takes this long


class Marks:
    """Runs a line in a terminal's shell and returns what it showed up to a
    marker the shell computes (the typed line's echo is not it)."""

    def __init__(self, term):
        self.term, self.n = term, 0

    def line(self, text):
        self.n += 1
        self.term.write("%s; echo M%d-$((6*7))\r" % (text, self.n))
        return self.term.read_until("M%d-42" % self.n, timeout=WAIT).decode()


@unittest.skipUnless(SOCKET, "set NSBOX_SOCKET to a running nsbox daemon's socket")
class TerminalTest(unittest.TestCase):
    def setUp(self):
        self.nsbox = Client(socket_path=SOCKET)

    def test_shell(self):
        with self.nsbox.session(processes=True, files={"from-host.txt": "hello"}) as s:
            with s.terminal(SHELL, cols=90, rows=30, env=ENV) as t:
                self.assertGreater(t.pid, 0)
                m = Marks(t)
                got = m.line("stty size; cat from-host.txt; echo; id -u")
                self.assertIn("30 90", got)
                self.assertIn("hello", got)
                self.assertIn("1000", got)
                # What is typed comes back as the terminal echoes it.
                self.assertIn("cat from-host.txt", got)

                t.resize(120, 45)
                self.assertIn("45 120", m.line("stty size"))

                # Ctrl-C ends the foreground sleep, not the shell.
                t.write("sh -c 'echo READY-$((1+1)); exec sleep 1000'\r")
                t.read_until("READY-2", timeout=WAIT)
                t.write("\x03")
                self.assertIn("SLEPT-130", m.line("echo SLEPT-$?"))

                # signal() reaches the foreground job too.
                t.write("sh -c 'echo READY-$((2+2)); exec sleep 1000'\r")
                t.read_until("READY-4", timeout=WAIT)
                t.signal("TERM")
                self.assertIn("TERMED-143", m.line("echo TERMED-$?"))

                t.write("exit 5\r")
                self.assertEqual(t.wait(timeout=WAIT), 5)
                self.assertEqual((t.exit_code, t.exit["status"]), (5, "exit status 5"))
                self.assertEqual(t.read(), b"")
                self.assertEqual(list(t), [])
                with self.assertRaises(nsbox.InvalidArgument):
                    t.write("echo late\r")

    def test_iterate_to_the_end(self):
        with self.nsbox.session(processes=True) as s:
            with s.terminal(["/bin/sh", "-c", "echo one; echo two; exit 3"]) as t:
                out = b"".join(t)
            self.assertIn(b"one\r\ntwo\r\n", out)
            self.assertEqual(t.exit_code, 3)

    def test_killed_by_a_signal(self):
        with self.nsbox.session(processes=True) as s:
            with s.terminal(["/bin/sh", "-c", "echo READY-$((1+1)); exec sleep 1000"]) as t:
                t.read_until("READY-2", timeout=WAIT)
                t.signal(9)
                self.assertEqual(t.wait(timeout=WAIT), -1)
                self.assertEqual(t.exit["signal"], 9)

    def test_read_until_misses(self):
        # A marker not seen in time: RequestTimeout naming it, and what
        # came meanwhile is kept for the next read. The end before it:
        # NsboxError with the status and the output.
        with self.nsbox.session(processes=True) as s:
            with s.terminal(["/bin/sh", "-c", "echo START-$((1+1)); exec sleep 1000"]) as t:
                with self.assertRaises(nsbox.RequestTimeout) as cm:
                    t.read_until("NEVER", timeout=0.5)
                self.assertIn("'NEVER' not seen within 0.5s", cm.exception.message)
                self.assertIn(b"START-2", t.read_until("START-2", timeout=WAIT))
            with s.terminal(["/bin/sh", "-c", "echo BYE-$((1+1)); exit 3"]) as t:
                with self.assertRaises(nsbox.NsboxError) as cm:
                    t.read_until("NEVER", timeout=WAIT)
                self.assertIn("ended (exit status 3) before", cm.exception.message)
                self.assertIn("BYE-2", cm.exception.message)

    def test_refused(self):
        with self.nsbox.session() as plain:
            with self.assertRaises(nsbox.InvalidArgument) as cm:
                plain.terminal()
            self.assertIn("process", cm.exception.message)
        with self.nsbox.session(processes=True) as s:
            with self.assertRaises(nsbox.InvalidArgument) as cm:
                s.terminal(["/no/such/program"])
            self.assertIn("/no/such/program", cm.exception.message)
            with self.assertRaises(nsbox.InvalidArgument):
                s.terminal(SHELL, cols=0)
            with self.assertRaises(TypeError):
                s.terminal("/bin/sh")
        with self.assertRaises(nsbox.NotFound):
            s.terminal(SHELL)

    def test_session_ends_under_it(self):
        s = self.nsbox.session(processes=True)
        with s.terminal(SHELL, env=ENV) as t:
            Marks(t).line("true")
            s.close()
            with self.assertRaises(nsbox.SessionDead):
                t.wait(timeout=WAIT)

    def test_output_left_unread(self):
        # The client reads nothing ahead: a flood it does not read stays
        # in the daemon's bounded hold and the pty, and the daemon ends the
        # terminal (10 s); reading then gets what was held, at most a
        # frame and a socket read buffered at a time, and ResourceExhausted.
        with self.nsbox.session(processes=True) as s:
            with s.terminal(["/bin/sh", "-c", "echo START-$((1+1)); exec yes flood"]) as t:
                t.read_until("START-2", timeout=WAIT)
                gone = s.exec("import os, time\nd = time.monotonic() + %d\n"
                              "while os.path.exists('/proc/%d') and time.monotonic() < d: time.sleep(0.1)\n"
                              "not os.path.exists('/proc/%d')" % (WAIT * 2, t.pid, t.pid))
                self.assertEqual(gone.value, "True", "the daemon did not end a terminal left unread")
                most = 0
                with self.assertRaises(nsbox.ResourceExhausted):
                    while t.read(timeout=WAIT):
                        most = max(most, len(t._frames.buf))
                self.assertLessEqual(most, MAX_PAYLOAD + 65536)


@unittest.skipUnless(SOCKET, "set NSBOX_SOCKET to a running nsbox daemon's socket")
class AsyncTerminalTest(unittest.TestCase):
    def test_shell(self):
        async def go():
            c = AsyncClient(socket_path=SOCKET)
            async with await c.session(processes=True) as s:
                async with await s.terminal(SHELL, cols=100, rows=20, env=ENV) as t:
                    t.pid > 0 or self.fail("no pid")
                    await t.write("stty size; echo A-$((6*7))\r")
                    size = await t.read_until("A-42", timeout=WAIT)
                    await t.resize(132, 50)
                    await t.write("sh -c 'stty size; echo READY-$((1+1)); exec sleep 1000'\r")
                    resized = await t.read_until("READY-2", timeout=WAIT)
                    await t.write("\x03")
                    await t.write("echo SLEPT-$?-$((1+1))\r")
                    slept = await t.read_until("SLEPT-130-2", timeout=WAIT)
                    await t.write("exit 4\r")
                    code = await t.wait(timeout=WAIT)
                async with await s.terminal(["/bin/sh", "-c", "echo one; exit 3"]) as t2:
                    out = b"".join([b async for b in t2])
                return size, resized, slept, code, out, t2.exit_code

        size, resized, slept, code, out, code2 = asyncio.run(go())
        self.assertIn(b"20 100", size)
        self.assertIn(b"50 132", resized)
        self.assertIn(b"SLEPT-130-2", slept)
        self.assertEqual(code, 4)
        self.assertIn(b"one", out)
        self.assertEqual(code2, 3)

    def test_read_until_misses(self):
        async def go():
            c = AsyncClient(socket_path=SOCKET)
            async with await c.session(processes=True) as s:
                async with await s.terminal(["/bin/sh", "-c", "echo START-$((1+1)); exec sleep 1000"]) as t:
                    with self.assertRaises(nsbox.RequestTimeout) as timed:
                        await t.read_until("NEVER", timeout=0.5)
                    kept = await t.read_until("START-2", timeout=WAIT)
                async with await s.terminal(["/bin/sh", "-c", "echo BYE-$((1+1)); exit 3"]) as t:
                    with self.assertRaises(nsbox.NsboxError) as ended:
                        await t.read_until("NEVER", timeout=WAIT)
                return timed.exception, kept, ended.exception

        timed, kept, ended = asyncio.run(go())
        self.assertIn("'NEVER' not seen within 0.5s", timed.message)
        self.assertIn(b"START-2", kept)
        self.assertIn("ended (exit status 3) before", ended.message)
        self.assertIn("BYE-2", ended.message)

    def test_refused(self):
        async def go():
            c = AsyncClient(socket_path=SOCKET)
            async with await c.session() as plain:
                try:
                    await plain.terminal()
                except nsbox.InvalidArgument as e:
                    return e
        self.assertIsInstance(asyncio.run(go()), nsbox.InvalidArgument)


class FramesTest(unittest.TestCase):
    """The terminal's frames, without a daemon."""

    def test_body(self):
        self.assertEqual(terminal_body(None, 80, 24, None, None), {"cols": 80, "rows": 24})
        self.assertEqual(terminal_body(["/bin/sh", "-l"], 10, 5, {"A": "b"}, "/tmp"),
                         {"cmd": "/bin/sh", "args": ["-l"], "cols": 10, "rows": 5, "env": {"A": "b"}, "cwd": "/tmp"})
        for bad in ([], "sh", [1]):
            with self.assertRaises(TypeError):
                terminal_body(bad, 80, 24, None, None)
        with self.assertRaises(nsbox.InvalidArgument):
            terminal_body(None, 80, 70000, None, None)

    def test_signals(self):
        for sig in ("INT", "sigint", "SIGINT", 2, __import__("signal").SIGINT):
            self.assertEqual(signal_frame(sig), b"s\x00\x00\x00\x04\x00\x00\x00\x02")
        for bad in ("NOPE", 0, 64):
            with self.assertRaises(nsbox.InvalidArgument):
                signal_frame(bad)

    def test_cut(self):
        f = Frames("t")
        f.buf = b"o" + struct.pack(">I", 3) + b"abcx"
        self.assertEqual(f.next(), (b"o", b"abc"))
        self.assertIsNone(f.next())  # a header not yet whole
        f.buf += struct.pack(">I", 2) + b"{"
        self.assertIsNone(f.next())  # a payload not yet whole
        f.buf += b"}"
        self.assertEqual(f.next(), (b"x", b"{}"))
        f.buf = b"o\xff\xff\xff\xff"
        with self.assertRaises(nsbox.NsboxError):
            f.next()


if __name__ == "__main__":
    unittest.main()
