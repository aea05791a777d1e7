"""The two-agent split of the code-interpreter cookbook: the host side
(file access) uploads data into the sandbox; the code side (the model's
code) only executes, and reads errors as text.

    NSBOX_SOCKET=/run/nsbox/nsbox.sock python3 examples/python_exec_tool.py
"""

import os
import sys
import tempfile

from nsbox import PythonExecTool

with tempfile.TemporaryDirectory() as d, PythonExecTool() as tool:
    # Host side: a file on the host goes into the session's /workspace.
    local = os.path.join(d, "traffic.csv")
    with open(local, "w") as f:
        f.write("day,visits\nmon,120\ntue,95\nwed,143\n")
    name = tool.upload_file(local)
    print("uploaded:", name)

    # Code side: what the model asked to run, through get_tool_definition()'s function.
    print("tool:", tool.get_tool_definition()["function"]["name"])
    answer = tool.run("import pandas as pd\ndf = pd.read_csv('traffic.csv')\n"
                      "print(df.loc[df.visits.idxmax(), 'day'], df.visits.sum())")
    print("answer:", answer.strip())
    error = tool.run("df.visitors.sum()")
    print("error for the model:", error.strip().splitlines()[-1])

ok = answer == "wed 358\n" and "AttributeError" in error
sys.exit(0 if ok else 1)
