"""Tests of the nsbox package's synchronous client against a real daemon.

Run with NSBOX_SOCKET naming a running daemon's socket:

    NSBOX_SOCKET=/run/nsbox/nsbox.sock python3 -m unittest discover -v -s tests -t .

NSBOX_DATASCI_ROOTFS names a rootfs with matplotlib for the figure test
(skipped without it).
"""

import os
import shutil
import struct
import tempfile
import unittest

import nsbox
from nsbox import Client

SOCKET = os.environ.get("NSBOX_SOCKET")
DATASCI = os.environ.get("NSBOX_DATASCI_ROOTFS")


def png_size(data):
    """(width, height) of PNG bytes, checking the signature and IHDR."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    assert data[12:16] == b"IHDR", data[12:16]
    return struct.unpack(">II", data[16:24])


@unittest.skipUnless(SOCKET, "set NSBOX_SOCKET to a running nsbox daemon's socket")
class ClientTest(unittest.TestCase):
    def setUp(self):
        self.nsbox = Client(socket_path=SOCKET)

    def test_health_info(self):
        self.assertEqual(self.nsbox.health()["status"], "ok")
        info = self.nsbox.info()
        self.assertEqual(info["api_version"], "v1")
        self.assertIn(info["default_rootfs"], info["rootfs"])

    def test_run_python(self):
        r = self.nsbox.run(code="print('hi')\n6 * 7")
        self.assertTrue(r.ok, r.raw)
        self.assertEqual(r.stdout, "hi\n")
        self.assertEqual(r.value, "42")
        self.assertEqual(r.exit_code, 0)
        self.assertIsNone(r.exception)

    def test_run_exception(self):
        r = self.nsbox.run(code="raise ValueError('bad input')")
        self.assertEqual(r.status, "exception")
        self.assertEqual(r.exception["name"], "ValueError")
        self.assertIn("bad input", r.exception["traceback"])

    def test_run_argv_files(self):
        r = self.nsbox.run(argv=["sh", "-c", "wc -l < data.csv > count.txt; cat blob.bin | wc -c"],
                           files={"data.csv": "a,b\n1,2\n", "blob.bin": b"\x00\x01\xff"},
                           return_files=["*.txt"], limits={"timeout_ms": 10000})
        self.assertTrue(r.ok, r.raw)
        self.assertEqual(r.stdout.strip(), "3")
        self.assertEqual(r.file("count.txt").strip(), b"2")
        with self.assertRaises(KeyError):
            r.file("data.csv")

    def test_run_init(self):
        # The command is pid 1 and ignores the SIGTERM it sends itself;
        # with init=True it is pid 1's child and dies of it, as on a host.
        code = "import os, signal; os.kill(os.getpid(), signal.SIGTERM); print('survived')"
        r = self.nsbox.run(argv=["python3", "-c", code])
        self.assertEqual((r.exit_code, r.stdout), (0, "survived\n"), r.raw)
        r = self.nsbox.run(code=code, init=True)
        self.assertEqual((r.status, r.exit_code, r.stdout), ("exit_nonzero", 143, ""), r.raw)
        with self.assertRaises(TypeError):
            self.nsbox.run(argv=["true"], init="yes")
        with self.nsbox.session(init=True) as s:
            self.assertEqual(s.exec("import os; os.getpid() == 1").value, "False")

    def test_run_timeout_is_a_result(self):
        r = self.nsbox.run(argv=["sleep", "10"], limits={"timeout_ms": 300})
        self.assertEqual(r.status, "timeout")

    def test_run_streaming(self):
        out, err = [], []
        r = self.nsbox.run(code="import sys, time\nprint('a', flush=True)\ntime.sleep(0.2)\nprint('b', file=sys.stderr, flush=True)\nprint('c')",
                           on_stdout=out.append, on_stderr=err.append)
        self.assertTrue(r.ok, r.raw)
        self.assertEqual("".join(out), "a\nc\n")
        self.assertEqual("".join(err), "b\n")
        self.assertGreaterEqual(len(out), 1)

    def test_typed_errors(self):
        with self.assertRaises(nsbox.InvalidArgument) as cm:
            self.nsbox.run(code="1", limits={"memory_bytes": -1})
        e = cm.exception
        self.assertIsInstance(e, nsbox.NsboxError)
        self.assertEqual((e.status, e.code), (400, "invalid_argument"))
        self.assertIn("memory_bytes", e.message)
        with self.assertRaises(nsbox.InvalidArgument):
            self.nsbox.run(code="1", files={"../escape": "x"})
        with self.assertRaises(ValueError):
            self.nsbox.run(code="1", argv=["true"])
        with self.assertRaises(nsbox.NotFound) as cm:
            nsbox.Session(self.nsbox, "0000000000000000").exec("1")
        self.assertEqual(cm.exception.status, 404)

    def test_run_batch(self):
        seen = []
        b = self.nsbox.run_batch([{"code": "print(%d)" % i} for i in range(20)] +
                                 [{"code": "1", "limits": {"memory_bytes": -1}}, {"argv": ["sh", "-c", "exit 3"]}],
                                 concurrency=2, on_item=lambda i, r: seen.append(i))
        self.assertEqual(sorted(seen), list(range(22)))
        self.assertEqual([r.stdout for r in b.results[:20]], ["%d\n" % i for i in range(20)])
        self.assertIsInstance(b.results[20], nsbox.InvalidArgument)
        self.assertEqual((b.results[21].status, b.results[21].exit_code), ("exit_nonzero", 3))
        self.assertEqual({k: b.summary[k] for k in ("runs", "ok", "failed", "errors")},
                         {"runs": 22, "ok": 20, "failed": 1, "errors": 1})
        self.assertFalse(b.ok)
        with self.assertRaisesRegex(TypeError, r"runs\[1\]: unknown run\(\) arguments cod"):
            self.nsbox.run_batch([{"code": "1"}, {"cod": "1"}])
        with self.assertRaisesRegex(nsbox.InvalidArgument, "max_concurrent"):
            self.nsbox.run_batch([{"code": "1"}], concurrency=10_000)

    def test_body_over_the_cap(self):
        # The daemon answers 413 before reading a body over its cap and
        # closes; the client reports that answer, not a daemon that is gone.
        big = b"x" * ((64 << 20) + 1)
        with self.assertRaisesRegex(nsbox.PayloadTooLarge, "64 MiB.*several session file uploads"):
            self.nsbox.run(code="1", files={"big.bin": big})
        with self.nsbox.session() as s:
            with self.assertRaises(nsbox.PayloadTooLarge) as cm:
                s.upload("big.bin", big)
            self.assertEqual(cm.exception.status, 413)
            s.upload("mid.bin", big[: 20 << 20])
            self.assertEqual(s.exec("import os; os.path.getsize('mid.bin')").value, str(20 << 20))

    def test_unreachable(self):
        with tempfile.TemporaryDirectory() as d:
            c = Client(socket_path=os.path.join(d, "none.sock"))
            with self.assertRaises(nsbox.DaemonUnreachable) as cm:
                c.health()
            msg = str(cm.exception)
            for want in (os.path.join(d, "none.sock"), "Is it running?", "systemctl start nsbox.socket", "NSBOX_SOCKET"):
                self.assertIn(want, msg)

    def test_session_watch(self):
        # A watch sees the session's changes in order and ends when its
        # directory goes; one of a session without processes is refused.
        with self.nsbox.session() as plain:
            with self.assertRaises(nsbox.InvalidArgument):
                plain.watch()
        with self.nsbox.session(processes=True) as s:
            self.assertTrue(s.exec("import os; os.makedirs('w')").ok)
            with s.watch("w", recursive=True) as w:
                self.assertEqual(w.path, "/workspace/w")
                self.assertTrue(s.exec("import os\nopen('w/a', 'w').write('x')\nos.rename('w/a', 'w/b')\n"
                                       "os.remove('w/b')\nos.rmdir('w')").ok)
                got = [(e["type"], e["name"]) for e in w]
            self.assertEqual(got, [("create", "a"), ("write", "a"), ("rename", "a"), ("create", "b"),
                                   ("remove", "b"), ("remove", ".")])
            with self.assertRaises(nsbox.NotFound):
                s.watch("missing")

    def test_session(self):
        with self.nsbox.session(limits={"timeout_ms": 20000}, files={"seed.txt": "seed"}) as s:
            self.assertIn(s.id, [x["id"] for x in self.nsbox.sessions()])
            self.assertTrue(s.exec("x = 41").ok)
            r = s.exec("x + 1")
            self.assertEqual((r.value, r.execution_count), ("42", 2))
            r = s.exec("1 / 0")
            self.assertEqual(r.status, "exception")
            self.assertEqual(r.exception["name"], "ZeroDivisionError")
            r = s.exec("while True: pass", timeout_ms=2000)  # after the cell started, on a busy machine too
            self.assertEqual(r.status, "timeout")
            self.assertEqual(s.exec("x").value, "41", "the session survives a timeout")

            out = []
            r = s.exec("for i in range(3): print(i, flush=True)", on_stdout=out.append)
            self.assertTrue(r.ok)
            self.assertEqual("".join(out), "0\n1\n2\n")

            blob = bytes(range(256)) * 10
            s.upload("in/blob.bin", blob)
            s.upload("in/text.txt", "héllo")
            self.assertEqual(s.download("in/blob.bin"), blob)
            self.assertEqual(s.exec("open('in/text.txt', encoding='utf-8').read()").value, "'héllo'")
            s.exec("open('out.csv', 'w').write('a,b\\n')")
            self.assertEqual(s.download("out.csv"), b"a,b\n")
            files = {f["path"]: f for f in s.files()}
            self.assertTrue(files["in"]["dir"])
            self.assertEqual(files["in/blob.bin"]["size"], len(blob))
            self.assertIn("seed.txt", files)
            s.delete_file("out.csv")
            with self.assertRaises(nsbox.NotFound):
                s.download("out.csv")
            with self.assertRaises(nsbox.InvalidArgument):
                s.download("/etc/passwd")
            with self.assertRaises(nsbox.InvalidArgument):
                s.download("../etc/passwd")
            self.assertEqual(s.info()["state"], "idle")
        # Closed: gone, and closing again is fine.
        self.assertNotIn(s.id, [x["id"] for x in self.nsbox.sessions()])
        s.close()
        with self.assertRaises(nsbox.NotFound):
            s.exec("1")

    @unittest.skipUnless(DATASCI, "set NSBOX_DATASCI_ROOTFS to a rootfs with Node.js (the datasci profile)")
    def test_javascript_and_typescript(self):
        r = self.nsbox.run(code="console.log(6 * 7); [1, 2]", language="javascript", rootfs=DATASCI)
        self.assertEqual((r.status, r.stdout, r.value), ("ok", "42\n", "[ 1, 2 ]"))
        r = self.nsbox.run(code="throw new RangeError('no')", language="javascript", rootfs=DATASCI)
        self.assertEqual((r.status, r.exception["name"], r.exception["value"]), ("exception", "RangeError", "no"))
        with self.nsbox.session(rootfs=DATASCI, language="typescript") as s:
            self.assertTrue(s.exec("const xs: number[] = [1, 2, 3]").ok)
            self.assertEqual(s.exec("xs.reduce((a: number, b: number) => a + b, 0)").value, "6")
            self.assertEqual(s.info()["language"], "typescript")
        with self.assertRaises(nsbox.InvalidArgument):
            self.nsbox.session(language="cobol")

    def test_contexts_and_exec_env(self):
        with self.nsbox.session() as s:
            self.assertTrue(s.exec("x = 'default'").ok)
            self.assertTrue(s.exec("x = 'other'", context="other").ok)
            self.assertEqual(s.exec("x", context="other").value, "'other'")
            self.assertEqual(s.exec("x").value, "'default'", "contexts do not share variables")
            r = s.exec("y = 1; y", context="third")
            self.assertEqual((r.value, r.execution_count), ("1", 1), "a context counts its own execs")
            r = s.exec("import os; os.environ.get('MODE')", env={"MODE": "fast"})
            self.assertEqual(r.value, "'fast'")
            self.assertEqual(s.exec("os.environ.get('MODE') is None").value, "True", "env holds for one exec")
            with self.assertRaises(nsbox.InvalidArgument):
                s.exec("1", context="no spaces")
            with self.assertRaises(TypeError):
                s.exec("1", env={"A": 1})

    def test_bad_input(self):
        # Caught before any request, each naming the fix.
        with self.assertRaisesRegex(TypeError, "code must be a str"):
            self.nsbox.run(code=b"print(1)")
        with self.assertRaisesRegex(TypeError, "argv: give a list of str"):
            self.nsbox.run(argv="ls -l")
        with self.assertRaises(nsbox.InvalidArgument) as cm:
            self.nsbox.run(code="1", limits={"timeout": 5, "memory_bytes": 1 << 20})
        self.assertIn("unknown key 'timeout'", cm.exception.message)
        self.assertIn("timeout_ms", cm.exception.message)
        with self.assertRaisesRegex(nsbox.InvalidArgument, r"limits\['timeout_ms'\]: give an integer, not str '5s'"):
            self.nsbox.run(code="1", limits={"timeout_ms": "5s"})
        with self.assertRaisesRegex(nsbox.InvalidArgument, r"limits\['memory_bytes'\]: give an integer, not float"):
            self.nsbox.run(code="1", limits={"memory_bytes": 1e9})
        self.assertTrue(self.nsbox.run(code="1", limits={"cpus": 0.5, "pids": None}).ok)
        with self.assertRaisesRegex(nsbox.InvalidArgument, "list of module names"):
            self.nsbox.run(code="1", allowed_imports="pandas")
        with self.nsbox.session() as s:
            with self.assertRaisesRegex(TypeError, "code must be a str"):
                s.exec(None)
            with self.assertRaisesRegex(TypeError, "timeout_ms: give an integer"):
                s.exec("1", timeout_ms="5000")
            self.assertEqual(s.info()["exec_count"], 0, "no bad exec reached the daemon")
        with self.assertRaisesRegex(TypeError, "retries"):
            Client(socket_path=SOCKET, retries="3")

    def test_limits_above_the_maxima(self):
        mx = self.nsbox.info()["max_limits"]
        for key in ("memory_bytes", "timeout_ms", "pids"):
            with self.assertRaises(nsbox.InvalidArgument) as cm:
                self.nsbox.run(code="1", limits={key: mx[key] + 1})
            self.assertEqual(cm.exception.status, 400)
            self.assertIn(key, cm.exception.message)
        with self.assertRaises(nsbox.InvalidArgument) as cm:
            self.nsbox.session(limits={"memory_bytes": mx["memory_bytes"] * 2})
        self.assertIn("memory_bytes", cm.exception.message)

    def test_allowed_imports_and_lifetime(self):
        r = self.nsbox.run(code="import json\nimport socket", allowed_imports=["json"])
        self.assertEqual(r.status, "exception")
        self.assertEqual(r.exception["name"], "ImportError")
        self.assertIn("allowed_imports is ['json']", r.exception["value"])
        self.assertTrue(self.nsbox.run(code="import socket", allowed_imports=None).ok)
        with self.nsbox.session(lifetime_ms=600000, allowed_imports=["json"]) as s:
            self.assertEqual(s.created["allowed_imports"], ["json"])
            self.assertTrue(s.exec("import json").ok)
            self.assertEqual(s.exec("import os").exception["name"], "ImportError")

    def test_network_reaches_the_daemon(self):
        # The test daemon has no [network]: the policy arrives and is refused
        # with the daemon's explanation, for runs and sessions alike.
        with self.assertRaisesRegex(nsbox.InvalidArgument, r"\[network\]"):
            self.nsbox.run(code="1", network=["pypi.org"])
        with self.assertRaisesRegex(nsbox.InvalidArgument, r"\[network\]"):
            self.nsbox.session(network={"allow": ["pypi.org"], "secrets": ["TOKEN"]})
        with self.assertRaisesRegex(nsbox.InvalidArgument, "list of hosts"):
            self.nsbox.run(code="1", network="pypi.org")
        with self.assertRaisesRegex(nsbox.InvalidArgument, "unknown keys hosts"):
            self.nsbox.run(code="1", network={"hosts": ["pypi.org"]})

    def test_pause_resume(self):
        with self.nsbox.session(idle_action="pause") as s:
            s.exec("x = 41")
            info = s.pause()
            self.assertEqual((info["state"], info["idle_action"]), ("paused", "pause"))
            self.assertIsNotNone(info["paused_at"])
            self.assertEqual(s.info()["state"], "paused")
            self.assertEqual(s.resume()["state"], "idle")
            s.pause()
            self.assertEqual(s.exec("x + 1").value, "42", "an exec thaws a paused session")
        with self.assertRaisesRegex(nsbox.InvalidArgument, "idle_action"):
            self.nsbox.session(idle_action="sleep")

    def test_conflicts_say_what_happened(self):
        # A busy session refuses pause, fork and park with SessionBusy (not
        # SessionDead: it lives on); a dead one raises SessionDead.
        import threading
        with self.nsbox.session() as s:
            ready, result = threading.Event(), []
            code = "import os, time\nprint('ready', flush=True)\nwhile not os.path.exists('/workspace/go'):\n    time.sleep(0.01)"
            t = threading.Thread(target=lambda: result.append(s.exec(code, on_stdout=lambda d: ready.set())))
            t.start()
            try:
                self.assertTrue(ready.wait(60), "the cell never said ready")
                for call in (s.pause, s.fork, s.park):
                    with self.assertRaises(nsbox.SessionBusy) as cm:
                        call()
                    self.assertIsInstance(cm.exception, nsbox.Conflict)
                    self.assertNotIsInstance(cm.exception, nsbox.SessionDead)
                    self.assertEqual((cm.exception.status, cm.exception.code), (409, "session_busy"))
            finally:
                s.upload("go", "")
                t.join()
            self.assertTrue(result and result[0].ok, result)
            self.assertTrue(s.exec("import os; os._exit(3)").session_dead)
            with self.assertRaises(nsbox.SessionDead) as cm:
                s.exec("1")
            self.assertEqual(cm.exception.code, "session_dead")

    def test_fork_park_revive(self):
        with self.nsbox.session() as s:
            s.exec("x = 41\np = {'v': [1, 2]}\nf = open('/etc/hostname')")
            s.upload("notes.txt", "kept")
            branches = s.fork(count=2)
            try:
                self.assertEqual(len(branches), 2)
                for b in branches:
                    self.assertNotEqual(b.id, s.id)
                    self.assertEqual(b.exec("x + 1").value, "42")
                    self.assertEqual(b.exec("p['v']").value, "[1, 2]")
                    self.assertEqual(b.download("notes.txt"), b"kept")
                    self.assertIn("f", [n["name"] for n in b.not_carried], "an open file is listed, not dropped")
                branches[0].exec("x = 0")
                self.assertEqual(branches[1].exec("x").value, "41", "a branch's change is its own")
                self.assertEqual(s.exec("x").value, "41", "and not the parent's")
            finally:
                for b in branches:
                    b.close()
            with self.assertRaisesRegex(nsbox.InvalidArgument, "1 to 16"):
                s.fork(count=17)

            info = s.park()
            self.assertEqual(info["state"], "parked")
            self.assertEqual(s.info()["state"], "parked")
            revived = s.revive()
            self.assertEqual(revived["state"], "idle")
            self.assertIn("f", [n["name"] for n in revived.get("not_carried") or []])
            self.assertEqual(s.exec("x + 1").value, "42")
            s.park()
            r = s.exec("p['v']")  # an exec revives a parked session
            self.assertEqual(r.value, "[1, 2]")
            self.assertEqual(s.download("notes.txt"), b"kept")

    @unittest.skipUnless(os.path.exists("/dev/loop-control") and shutil.which("mkfs.ext4"),
                         "named volumes need loop devices and e2fsprogs on the daemon's host")
    def test_volumes(self):
        name = "pyclient-%d" % os.getpid()
        vol = self.nsbox.create_volume(name, 32 << 20)
        try:
            self.assertIn(name, [v["name"] for v in self.nsbox.volumes()])
            self.assertEqual(vol.info()["size_bytes"], 32 << 20)
            vol.upload("in/a.txt", "from the host")
            r = self.nsbox.run(code="print(open('/mnt/%s/in/a.txt').read()); open('/mnt/%s/out.txt', 'w').write('hi')"
                               % (name, name), volumes=[name])
            self.assertTrue(r.ok, r.raw)
            self.assertEqual(r.stdout, "from the host\n")
            self.assertEqual(vol.download("out.txt"), b"hi", "a run's write outlives the run")
            with self.nsbox.session(volumes=[name + ":/mnt/ro:ro"]) as s:
                self.assertEqual(s.exec("open('/mnt/ro/out.txt').read()").value, "'hi'")
                r = s.exec("open('/mnt/ro/x', 'w')")
                self.assertIn("Read-only file system", r.exception["value"])
            self.assertIn("out.txt", [f["path"] for f in vol.files()])
            with self.assertRaises(nsbox.NotFound):
                self.nsbox.run(code="1", volumes=["no-such-volume"])
            with self.assertRaisesRegex(nsbox.InvalidArgument, "volumes"):
                self.nsbox.run(code="1", volumes="data")
        finally:
            vol.delete()
        self.assertNotIn(name, [v["name"] for v in self.nsbox.volumes()])

    def test_deadline(self):
        # A client deadline shorter than the daemon's answer: RequestTimeout,
        # which is also a TimeoutError.
        c = Client(socket_path=SOCKET, timeout=0.2)
        with self.assertRaises(nsbox.RequestTimeout) as cm:
            c._json("POST", "/v1/runs", {"argv": ["sleep", "2"]}, deadline=0.2)
        self.assertIsInstance(cm.exception, TimeoutError)
        # A run's own limit extends the deadline: this one outlives timeout.
        self.assertTrue(c.run(argv=["sleep", "0.5"], limits={"timeout_ms": 5000}).ok)

    @unittest.skipUnless(os.environ.get("NSBOX_EXPECT_INSTALLED"), "set NSBOX_EXPECT_INSTALLED when testing a pip-installed package")
    def test_installed(self):
        import sys
        self.assertTrue(nsbox.__file__.startswith(sys.prefix) and "site-packages" in nsbox.__file__,
                        "nsbox imported from %s, not from the environment at %s" % (nsbox.__file__, sys.prefix))
        self.assertTrue(os.path.exists(os.path.join(os.path.dirname(nsbox.__file__), "py.typed")))

    def test_deprecated_shim(self):
        import importlib
        import sys
        import warnings
        sys.modules.pop("nsbox_client", None)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            shim = importlib.import_module("nsbox_client")
        self.assertIs(shim.Client, Client)
        self.assertTrue(any(issubclass(x.category, DeprecationWarning) and "import nsbox" in str(x.message) for x in w))

    @unittest.skipUnless(DATASCI, "set NSBOX_DATASCI_ROOTFS to a rootfs with matplotlib")
    def test_figures(self):
        with self.nsbox.session(rootfs=DATASCI) as s:
            r = s.exec("import matplotlib.pyplot as plt\nplt.figure(figsize=(2, 1), dpi=100)\nplt.plot([1, 2])\nplt.show()\n"
                       "plt.figure(figsize=(3, 2), dpi=100)\nplt.bar([1, 2], [3, 4])")
            self.assertTrue(r.ok, r.raw)
            self.assertEqual([png_size(p) for p in r.figures], [(200, 100), (300, 200)])
            self.assertEqual([c["type"] for c in r.charts], ["line", "bar"])
            self.assertEqual([e["value"] for e in r.charts[1]["elements"]], [3, 4])
            r = s.exec("import pandas as pd\npd.DataFrame({'a': [1, 2]})")
            self.assertEqual(r.value_data, {"a": [1, 2]})


if __name__ == "__main__":
    unittest.main()
