"""CodeExecutor and ResourceLimits, as the orchestration and agent-framework
documents use them: limits in their terms, a security level mapped onto the
daemon's profiles, and a result with timeout and memory_exceeded flags.

    NSBOX_SOCKET=/run/nsbox/nsbox.sock python3 examples/code_executor.py
"""

import sys

from nsbox import CodeExecutor, ResourceLimits

executor = CodeExecutor(language="python", timeout=30, max_memory_mb=512, max_cpu_percent=50)
result = executor.execute("import statistics\nprint(statistics.mean([2, 4, 9]))")
print("stdout:", result.stdout.strip(), "| time:", result.execution_time_ms, "ms",
      "| timeout:", result.timeout, "| memory_exceeded:", result.memory_exceeded)

# Untrusted code under the strict profile, with a tighter memory limit.
strict = CodeExecutor(limits=ResourceLimits(max_memory_mb=64, max_cpu_percent=25,
                                            max_execution_time_seconds=2, security_level="strict"))
hog = strict.execute("data = bytearray(512 << 20)")
print("memory hog -> memory_exceeded:", hog.memory_exceeded, "| status:", hog.status)
spin = strict.execute("while True: pass")
print("endless loop -> timeout:", spin.timeout, "| status:", spin.status)

ok = result.success and result.stdout == "5\n" and hog.memory_exceeded and spin.timeout
sys.exit(0 if ok else 1)
