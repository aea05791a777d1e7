"""SecureExecutor and CodeExecutionTool, as a smolagents-style agent uses
them: the model's code may import pandas and numpy, nothing else.

    NSBOX_SOCKET=/run/nsbox/nsbox.sock python3 examples/secure_executor.py
"""

import sys

from nsbox import CodeExecutionTool, SecureExecutor

executor = SecureExecutor(allowed_imports=["pandas", "numpy"], execution_timeout=5)
tool = CodeExecutionTool(executor)

# A snippet the model wrote: allowed imports, a table, a number back.
result = tool.execute_code("""
import pandas as pd
df = pd.DataFrame({"city": ["Oslo", "Lima", "Oslo"], "temp": [3, 19, 5]})
print(df.groupby("city").temp.mean().to_dict())
""")
print("status:", result["status"], "| output:", result["output"].strip())

# One that strays: the import is refused inside the sandbox, and the error
# tells the model which modules it may use.
stray = tool.execute_code("import subprocess\nsubprocess.run(['id'])")
print("status:", stray["status"], "|", stray["error"]["type"] + ":", stray["error"]["message"])

# One that never ends: stopped at execution_timeout.
slow = executor.run("while True: pass")
print("status:", slow["status"])

ok = (result["success"] and result["output"].strip() == "{'Lima': 19.0, 'Oslo': 4.0}"
      and stray["error"]["type"] == "ImportError" and slow["status"] == "timeout")
sys.exit(0 if ok else 1)
