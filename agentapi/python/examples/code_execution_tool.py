"""A code-execution tool for one conversation (the Anthropic-style shape):
one sandboxed Python session that lives an hour, files in and out, and
answers of stdout, stderr, return_code and the files produced.

    NSBOX_SOCKET=/run/nsbox/nsbox.sock python3 examples/code_execution_tool.py
"""

import json
import sys

from nsbox import CodeExecutionSession

with CodeExecutionSession() as sandbox:
    # What to register with the model (its tools list).
    print("tool:", json.dumps(CodeExecutionSession.TOOL)[:72] + "...")

    # The user attached a file: it goes into the session's /workspace.
    sandbox.upload("orders.csv", "item,qty\napple,3\npear,5\napple,4\n")

    # The model's tool calls, in turn; state and files persist between them.
    first = sandbox.handle({"code": "import csv\nrows = list(csv.DictReader(open('orders.csv')))\nprint(len(rows), 'rows')"})
    second = sandbox.handle({"code": (
        "totals = {}\n"
        "for r in rows:\n"
        "    totals[r['item']] = totals.get(r['item'], 0) + int(r['qty'])\n"
        "open('totals.json', 'w').write(str(totals))\n"
        "print(totals)")})
    failed = sandbox.handle({"code": "rows[10]"})
    for name, out in (("first", first), ("second", second), ("failed", failed)):
        print(name, "->", {"stdout": out["stdout"].strip(), "return_code": out["return_code"],
                           "files": [f["path"] for f in out["files"]],
                           "stderr": out["stderr"].strip().splitlines()[-1:] or ""})

    # The file the code produced goes back to the user.
    produced = sandbox.download("totals.json").decode()
    print("totals.json:", produced)

ok = (first["stdout"] == "3 rows\n" and second["return_code"] == 0 and
      [f["path"] for f in second["files"]] == ["totals.json"] and produced == "{'apple': 7, 'pear': 5}" and
      failed["return_code"] == 1 and "IndexError" in failed["stderr"])
sys.exit(0 if ok else 1)
