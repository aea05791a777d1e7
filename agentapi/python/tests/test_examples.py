"""Runs every script in examples/ as a user would (python3 examples/X.py)
against a real daemon whose default rootfs has pandas; each exits non-zero
when what it shows did not happen."""

import glob
import os
import subprocess
import sys
import unittest

import nsbox
from nsbox import Client

SOCKET = os.environ.get("NSBOX_SOCKET")
DATASCI = os.environ.get("NSBOX_DATASCI_ROOTFS")
EXAMPLES = sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "*.py")))


@unittest.skipUnless(SOCKET and DATASCI, "set NSBOX_DATASCI_ROOTFS and NSBOX_SOCKET (the examples use pandas)")
class ExamplesTest(unittest.TestCase):
    def test_examples(self):
        default = Client(socket_path=SOCKET).info()["default_rootfs"]
        if default != DATASCI:
            self.skipTest("the examples use the daemon's default rootfs, %r; start it with --default-rootfs %s"
                          % (default, DATASCI))
        self.assertEqual(len(EXAMPLES), 4, EXAMPLES)
        # The examples import the nsbox these tests import: the installed
        # one, or the source tree's when the tests run from it.
        pkg = os.path.dirname(os.path.dirname(os.path.abspath(nsbox.__file__)))
        env = dict(os.environ, NSBOX_SOCKET=SOCKET,
                   PYTHONPATH=os.pathsep.join(filter(None, [pkg, os.environ.get("PYTHONPATH")])))
        for path in EXAMPLES:
            with self.subTest(example=os.path.basename(path)):
                p = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=300, env=env)
                self.assertEqual(p.returncode, 0, "%s failed:\n%s\n%s" % (path, p.stdout, p.stderr))


if __name__ == "__main__":
    unittest.main()
