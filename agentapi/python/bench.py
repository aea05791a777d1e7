"""Benchmarks of the nsbox Python package against a running daemon.

    NSBOX_SOCKET=/run/nsbox/nsbox.sock python3 bench.py [--rounds 200] [--rootfs default]

Cases run in alternating rounds (one of each per round, in a random
order), so that the machine's load hits them alike; it prints p50 and p90 per case and the
spread (p90/p50) of the baseline as the machine's noise.

- client overhead: a session exec `x += 1` sent by hand over a raw socket
  (the floor for any Python client: one HTTP/1.1 exchange), by
  nsbox.Client, and by nsbox.AsyncClient;
- allowed_imports: the same cell importing json in a session with and
  without an allowlist, and a fresh run importing pandas (every module
  pandas loads goes through the hook when it was not pre-imported) with
  and without one.
"""

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nsbox  # noqa: E402


def raw_exec(path, sid, code):
    body = json.dumps({"code": code}).encode()
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.sendall(b"POST /v1/sessions/%s/exec HTTP/1.1\r\nHost: nsbox\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\nConnection: close\r\n\r\n" % (sid.encode(), len(body)) + body)
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += s.recv(65536)
    head, _, body = buf.partition(b"\r\n\r\n")
    if b"content-length:" in head.lower():
        length = int(head.lower().split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
        while len(body) < length:
            body += s.recv(65536)
    else:  # chunked
        while not body.endswith(b"0\r\n\r\n"):
            body += s.recv(65536)
    s.close()
    if b" 200 " not in head.split(b"\r\n", 1)[0]:
        raise RuntimeError(head[:200])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--rootfs", default=None, help="rootfs with pandas for the pandas cases (default: the daemon's)")
    args = ap.parse_args()
    client = nsbox.Client()
    aclient = nsbox.AsyncClient()
    loop = asyncio.new_event_loop()
    plain = client.session(rootfs=args.rootfs)
    guarded = client.session(rootfs=args.rootfs, allowed_imports=["json"])
    asess = loop.run_until_complete(aclient.session(rootfs=args.rootfs))
    for s in (plain, guarded):
        s.exec("x = 0")
    loop.run_until_complete(asess.exec("x = 0"))
    pandas = "import pandas as pd\npd.DataFrame({'a': [1, 2]}).a.sum()"

    def timed(fn):
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1000

    cases = {
        "session exec x += 1, raw socket (baseline)": lambda: raw_exec(client.socket_path, plain.id, "x += 1"),
        "session exec x += 1, nsbox.Client": lambda: plain.exec("x += 1"),
        "session exec x += 1, nsbox.AsyncClient": lambda: loop.run_until_complete(asess.exec("x += 1")),
        "session exec import json, no allowlist": lambda: plain.exec("import json; json.dumps(1)"),
        "session exec import json, allowed_imports": lambda: guarded.exec("import json; json.dumps(1)"),
        "run import pandas, no allowlist": lambda: client.run(code=pandas, rootfs=args.rootfs),
        "run import pandas, allowed_imports": lambda: client.run(code=pandas, rootfs=args.rootfs,
                                                                  allowed_imports=["pandas"]),
    }
    times = {k: [] for k in cases}
    for fn in cases.values():  # warm-up
        fn()
    order = list(cases)
    for _ in range(args.rounds):
        random.shuffle(order)  # a run's teardown slows whatever follows it: spread that evenly
        for k in order:
            times[k].append(timed(cases[k]))
    for s in (plain, guarded):
        s.close()
    loop.run_until_complete(asess.close())
    print("%-48s %9s %9s" % ("case (%d rounds)" % args.rounds, "p50 ms", "p90 ms"))
    for k, v in times.items():
        v.sort()
        print("%-48s %9.3f %9.3f" % (k, statistics.median(v), v[int(len(v) * 0.9)]))
    base = sorted(times["session exec x += 1, raw socket (baseline)"])
    print("noise (baseline p90/p50): %.2f; load average %s" % (base[int(len(base) * 0.9)] / statistics.median(base),
                                                             os.getloadavg()))


if __name__ == "__main__":
    main()
