"""Tests of the adapters (nsbox.executors, nsbox.tools) against a real
daemon (NSBOX_SOCKET); NSBOX_DATASCI_ROOTFS names a rootfs with pandas for
the tests that need it."""

import os
import tempfile
import unittest

import nsbox
from nsbox import (Client, CodeExecutionSession, CodeExecutionTool, CodeExecutor, PythonExecTool, ResourceLimits,
                   SecureExecutor)

SOCKET = os.environ.get("NSBOX_SOCKET")
DATASCI = os.environ.get("NSBOX_DATASCI_ROOTFS")


@unittest.skipUnless(SOCKET, "set NSBOX_SOCKET to a running nsbox daemon's socket")
class SecureExecutorTest(unittest.TestCase):
    def setUp(self):
        self.client = Client(socket_path=SOCKET)

    @unittest.skipUnless(DATASCI, "set NSBOX_DATASCI_ROOTFS to a rootfs with pandas")
    def test_allowed_imports_pandas(self):
        ex = SecureExecutor(allowed_imports=["pandas", "numpy"], client=self.client, rootfs=DATASCI)
        out = ex.run("import pandas as pd\nimport numpy as np\n"
                     "df = pd.DataFrame({'x': np.arange(4)})\nprint(df.x.sum())\ndf.describe().loc['mean', 'x']")
        self.assertEqual(out["status"], "success", out)
        self.assertEqual((out["stdout"], out["result"], out["output"]), ("6\n", "1.5", "6\n1.5"))
        self.assertIsNone(out["error"])
        refused = {
            "import os": "os", "import subprocess": "subprocess", "import socket": "socket",
            "from os import path": "os", "import os.path": "os.path", "__import__('os')": "os",
            "import importlib": "importlib", "import pandas\nexec('import socket')": "socket",
        }
        for code, mod in refused.items():
            out = ex.run(code)
            self.assertEqual(out["status"], "error", code)
            self.assertEqual(out["error"]["type"], "ImportError", code)
            self.assertIn("import of %r is not allowed: allowed_imports is ['pandas', 'numpy']" % mod,
                          out["error"]["message"], code)

    def test_importlib_when_allowed(self):
        ex = SecureExecutor(allowed_imports=["importlib", "json"], client=self.client)
        self.assertEqual(ex.run("import importlib\nimportlib.import_module('socket')")["error"]["type"], "ImportError")
        self.assertEqual(ex.run("import importlib\nimportlib.import_module('json').dumps(1)")["result"], "'1'")

    def test_no_list_allows_everything(self):
        out = SecureExecutor(client=self.client).run("import os, socket, subprocess\nos.sep")
        self.assertEqual((out["status"], out["result"]), ("success", "'/'"))

    def test_timeout_and_errors(self):
        ex = SecureExecutor(execution_timeout=0.5, client=self.client)
        out = ex.run("while True: pass")
        self.assertEqual(out["status"], "timeout")
        self.assertEqual(out["error"]["type"], "TimeoutError")
        self.assertIn("<cell 1>", out["error"]["traceback"])
        out = ex.run("def f():\n    raise ValueError('bad')\nf()")
        self.assertEqual((out["status"], out["error"]["type"], out["error"]["message"]), ("error", "ValueError", "bad"))
        self.assertIn("line 2, in f", out["error"]["traceback"])
        with self.assertRaisesRegex(TypeError, "code must be a str"):
            ex.run(b"print(1)")
        for bad in (0, -1, "5", None):
            with self.assertRaisesRegex(ValueError, "execution_timeout must be a positive number of seconds"):
                SecureExecutor(execution_timeout=bad)
        with self.assertRaises(TypeError):
            SecureExecutor(allowed_imports="pandas")

    def test_code_execution_tool(self):
        tool = CodeExecutionTool(SecureExecutor(allowed_imports=["math"], client=self.client))
        out = tool.execute_code("import math\nprint(math.factorial(5))")
        self.assertTrue(out["success"], out)
        self.assertEqual(out["output"], "120\n")
        out = tool.execute_code("import os")
        self.assertFalse(out["success"])
        self.assertEqual(out["error"]["type"], "ImportError")
        with self.assertRaisesRegex(TypeError, "code_snippet must be a str"):
            tool.execute_code(["print(1)"])
        self.assertIn("code_snippet", tool.inputs)


@unittest.skipUnless(SOCKET, "set NSBOX_SOCKET to a running nsbox daemon's socket")
class CodeExecutorTest(unittest.TestCase):
    def setUp(self):
        self.client = Client(socket_path=SOCKET)

    def test_execute(self):
        r = CodeExecutor(timeout=10, max_memory_mb=256, max_cpu_percent=50, client=self.client).execute("print('hi')")
        self.assertTrue(r.success)
        self.assertEqual((r.stdout, r.exit_code, r.timeout, r.memory_exceeded), ("hi\n", 0, False, False))
        self.assertGreaterEqual(r.execution_time_ms, 0)
        r = CodeExecutor(client=self.client).execute("import sys\nprint('x', file=sys.stderr)\n{}['k']")
        self.assertEqual((r.success, r.exit_code, r.error["type"]), (False, 1, "KeyError"))
        self.assertTrue(r.stderr.startswith("x\nTraceback (most recent call last):\n"), r.stderr)
        self.assertTrue(r.stderr.endswith("KeyError: 'k'\n"), r.stderr)
        self.assertEqual(r.raw.stderr, "x\n")
        r = CodeExecutor(language="bash", client=self.client).execute("echo $((6 * 7)); exit 3")
        self.assertEqual((r.stdout, r.exit_code, r.success, r.error["type"]), ("42\n", 3, False, "NonZeroExit"))
        self.assertEqual(r.stderr, "")

    def test_timeout_and_memory(self):
        r = CodeExecutor(timeout=0.5, client=self.client).execute("while True: pass")
        self.assertTrue(r.timeout)
        self.assertTrue(r.stderr.endswith("TimeoutError: the code ran past its time limit and was stopped\n"), r.stderr)
        self.assertFalse(r.memory_exceeded)
        r = CodeExecutor(max_memory_mb=64, client=self.client).execute("b = bytearray(256 << 20)\nprint(len(b))")
        self.assertTrue(r.memory_exceeded, r)
        self.assertFalse(r.timeout)
        self.assertEqual(r.stdout, "")

    def test_resource_limits(self):
        info = self.client.info()
        strict = {p["name"]: p for p in info["profiles"]}["strict"]["limits"]
        lim = ResourceLimits(security_level="strict")
        self.assertEqual((lim.profile, lim.to_nsbox()), ("strict", {}))
        # The strict profile's memory limit applies: more is OOM.
        big = int(strict["memory_bytes"] * 1.5)
        r = CodeExecutor(limits=lim, client=self.client).execute("b = bytearray(%d)" % big)
        self.assertTrue(r.memory_exceeded, r)
        lim = ResourceLimits(max_memory_mb=300, max_cpu_percent=25, max_execution_time_seconds=2,
                             max_file_size_mb=16, security_level="permissive")
        self.assertEqual(lim.to_nsbox(), {"memory_bytes": 300 << 20, "cpus": 0.25, "timeout_ms": 2000,
                                          "disk_bytes": 16 << 20})
        # max_file_size_mb bounds /workspace: a bigger file cannot be written.
        r = CodeExecutor(limits=lim, client=self.client).execute(
            "open('big.bin', 'wb').write(b'x' * (32 << 20))")
        self.assertFalse(r.success)
        self.assertRegex(r.error["message"], "File too large|No space left on device")
        with self.assertRaisesRegex(ValueError, "strict, standard, permissive"):
            ResourceLimits(security_level="paranoid")
        with self.assertRaises(ValueError):
            ResourceLimits(max_memory_mb=-1)
        with self.assertRaisesRegex(ValueError, "python, bash"):
            CodeExecutor(language="cobol")

    def test_above_the_maxima(self):
        mx = self.client.info()["max_limits"]
        too_much = mx["memory_bytes"] // (1 << 20) + 1024
        with self.assertRaises(nsbox.InvalidArgument) as cm:
            CodeExecutor(max_memory_mb=too_much, client=self.client).execute("1")
        self.assertIn("memory_bytes", cm.exception.message)
        with self.assertRaises(nsbox.InvalidArgument) as cm:
            CodeExecutor(max_cpu_percent=mx["cpus"] * 100 + 100, client=self.client).execute("1")
        self.assertIn("cpus", cm.exception.message)


@unittest.skipUnless(SOCKET, "set NSBOX_SOCKET to a running nsbox daemon's socket")
class SessionToolsTest(unittest.TestCase):
    def setUp(self):
        self.client = Client(socket_path=SOCKET)

    def test_code_execution_session(self):
        with CodeExecutionSession(client=self.client) as cs:
            cs.upload("in/data.txt", "3\n4\n")
            out = cs.execute("nums = [int(x) for x in open('in/data.txt')]\n"
                             "open('sum.txt', 'w').write(str(sum(nums)))\nprint('done')")
            self.assertEqual((out["stdout"], out["stderr"], out["return_code"]), ("done\n", "", 0), out)
            self.assertEqual([f["path"] for f in out["files"]], ["sum.txt"])
            self.assertEqual(cs.download("sum.txt"), b"7")
            out = cs.execute("open('in/data.txt', 'a').write('5\\n')")
            self.assertEqual([f["path"] for f in out["files"]], ["in/data.txt"], "a changed file is listed")
            self.assertEqual(cs.execute("len(nums)")["value"], "2", "state persists")
            out = cs.execute("1 / 0")
            self.assertEqual(out["return_code"], 1)
            self.assertIn("ZeroDivisionError: division by zero", out["stderr"])
            # 2 s: an interrupt before the cell started (a busy machine)
            # would be ignored and the session killed.
            out = cs.execute("while True: pass", timeout_ms=2000)
            self.assertEqual(out["return_code"], 124)
            self.assertIn("KeyboardInterrupt", out["stderr"], "where it was stopped")
            self.assertTrue(out["stderr"].endswith("TimeoutError: the code ran past its time limit and was stopped\n"),
                            out["stderr"])
            info = cs.session.info()
            self.assertEqual(info["idle_timeout_ms"], 3600000)
            self.assertEqual(cs.handle({"code": "print(len(nums))"})["stdout"], "2\n")
            self.assertEqual(CodeExecutionSession.TOOL["input_schema"]["required"], ["code"])
            sid = cs.session.id
        self.assertNotIn(sid, [s["id"] for s in self.client.sessions()], "closed")

    def test_session_lives_an_hour(self):
        with CodeExecutionSession(client=self.client) as cs:
            info = cs.session.info()
            from datetime import datetime
            created = datetime.strptime(info["created_at"][:19], "%Y-%m-%dT%H:%M:%S")
            expires = datetime.strptime(info["expires_at"][:19], "%Y-%m-%dT%H:%M:%S")
            self.assertEqual((expires - created).total_seconds(), 3600)

    def test_a_missing_file_keeps_the_session(self):
        with CodeExecutionSession(client=self.client) as cs:
            cs.execute("x = 1")
            sid = cs.session.id
            with self.assertRaisesRegex(nsbox.NotFound, "missing.txt"):
                cs.download("missing.txt")
            out = cs.execute("x")
            self.assertEqual((out["value"], out["stderr"], cs.session.id), ("1", "", sid))

    def test_a_dead_session_is_replaced(self):
        with CodeExecutionSession(client=self.client, limits={"memory_bytes": 64 << 20}) as cs:
            cs.execute("x = 1")
            dead = cs.session.id
            out = cs.execute("b = bytearray(256 << 20)")
            self.assertEqual(out["return_code"], 137)
            out = cs.execute("print('again')")
            self.assertEqual(out["return_code"], 0)
            self.assertEqual(out["stdout"], "again\n")
            self.assertIn("a new one was started", out["stderr"])
            self.assertIn("NameError", cs.execute("x")["stderr"])
            self.assertNotIn(dead, [s["id"] for s in self.client.sessions()], "the dead session was deleted")

    @unittest.skipUnless(DATASCI, "set NSBOX_DATASCI_ROOTFS to a rootfs with pandas")
    def test_python_exec_tool(self):
        with tempfile.TemporaryDirectory() as d, PythonExecTool(client=self.client, rootfs=DATASCI) as tool:
            path = os.path.join(d, "sales.csv")
            with open(path, "w") as f:
                f.write("region,amount\nnorth,10\nsouth,5\nnorth,7\n")
            self.assertEqual(tool.upload_file(path), "sales.csv")          # host side
            text = tool.run("import pandas as pd\ndf = pd.read_csv('sales.csv')\n"
                            "print(df.groupby('region').amount.sum().to_dict())")  # code side
            self.assertEqual(text, "{'north': 17, 'south': 5}\n")
            self.assertIn("NameError", tool.run("undefined_name"))
            tool.timeout_ms = 2000  # after the cell started, on a busy machine too
            self.assertTrue(tool.run("import time\ntime.sleep(30)").endswith(
                "TimeoutError: the code ran past its time limit and was stopped\n"))
            self.assertEqual(tool.run("len(df)"), "3\n", "state persists")
            defn = tool.get_tool_definition()
            self.assertEqual(defn["function"]["name"], "execute_python_code")
            with self.assertRaises(ValueError):
                tool.upload_file(b"x")


if __name__ == "__main__":
    unittest.main()
