#!/usr/bin/env python3
"""What a data-analysis agent does with nsbox, without the LLM.

An agent that analyses a user's data gets a file from the host and then
writes code cells one after the other, reading each result before the
next. This script plays both parts with fixed cells and checks every
result:

1. Host side: it generates a CSV (sales.csv, a known linear relation plus
   noise) in a private temp directory and computes the expected statistics
   itself, in plain Python.
2. File access: the one file is handed to a fresh session (upload); nothing
   else of the host is reachable — a cell shows that the host path of the
   CSV does not exist in the sandbox, that the host's files are not there
   and that there is no network.
3. Cells: load with pandas, summary statistics, a regression (numpy
   polyfit), two plots. Each result is checked against the host's numbers;
   the PNGs are decoded (signature, chunk CRCs, zlib stream, size).

Usage: data_analysis.py [--socket SOCK] [--rootfs default] [--out DIR]
Needs a daemon and the data-science rootfs (pandas, numpy, matplotlib).
Exits non-zero on the first failed check.
"""

import argparse
import json
import os
import random
import statistics
import struct
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "agentapi", "python"))
from nsbox import Client  # noqa: E402

SLOPE, INTERCEPT, ROWS = 3.0, 2.0, 300
REGIONS = ("north", "south", "west")


def make_csv(path):
    """Writes the CSV and returns its rows as the host sees them."""
    rng = random.Random(7)
    rows = []
    for i in range(ROWS):
        x = round(rng.uniform(0, 10), 3)
        y = round(SLOPE * x + INTERCEPT + rng.gauss(0, 1.5), 3)
        rows.append((x, y, REGIONS[i % 3]))
    with open(path, "w") as f:
        f.write("ad_spend,revenue,region\n")
        for x, y, r in rows:
            f.write("%s,%s,%s\n" % (x, y, r))
    return rows


def least_squares(xs, ys):
    """Slope and intercept of the ordinary least-squares line, in plain Python."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sxy / sxx
    return slope, my - slope * mx


def check_png(data, want_size):
    """Decodes a PNG's structure: signature, every chunk's CRC, IHDR, the
    zlib stream of IDAT and its length (one filter byte per row)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, chunks, idat = 8, [], b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, "bad CRC in chunk %r" % kind
        chunks.append(kind)
        if kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert chunks[0] == b"IHDR" and chunks[-1] == b"IEND", chunks
    ihdr = data[16:29]
    width, height, depth, color = struct.unpack(">IIBB", ihdr[:10])
    assert (width, height) == want_size, "PNG is %dx%d, want %dx%d" % (width, height, *want_size)
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[color]
    raw = zlib.decompress(idat)
    assert len(raw) == height * (1 + width * channels * depth // 8), "pixel data has the wrong size"
    return width, height


class Agent:
    """Runs cells in one session and logs them like a notebook."""

    def __init__(self, session):
        self.s = session

    def cell(self, code, want_ok=True):
        print(">>> " + code.replace("\n", "\n... "))
        r = self.s.exec(code, timeout_ms=120000)
        for line in (r.stdout or "").splitlines()[:20]:
            print("    " + line)
        if r.value:
            print("    = " + r.value[:200])
        if want_ok:
            assert r.ok, "cell failed: %s %s" % (r.status, (r.exception or {}).get("traceback", r.error))
        return r

    def json_cell(self, code):
        """Runs a cell whose last line prints one JSON document; returns it."""
        r = self.cell(code)
        return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--socket", default=None, help="daemon socket (default: $NSBOX_SOCKET or /run/nsbox/nsbox.sock)")
    ap.add_argument("--rootfs", default="default", help="data-science rootfs (pandas, numpy, matplotlib)")
    ap.add_argument("--out", default=None, help="directory for the plots fetched back (default: a temp dir)")
    args = ap.parse_args()
    out_dir = args.out or tempfile.mkdtemp(prefix="nsbox-example-")
    os.makedirs(out_dir, exist_ok=True)

    # 1. Host side: the user's data, in a directory only the host can see.
    host_dir = tempfile.mkdtemp(prefix="nsbox-host-data-")
    host_csv = os.path.join(host_dir, "sales.csv")
    rows = make_csv(host_csv)
    xs, ys = [r[0] for r in rows], [r[1] for r in rows]
    want_slope, want_intercept = least_squares(xs, ys)
    want_means = {reg: statistics.fmean(y for _, y, r in rows if r == reg) for reg in REGIONS}
    print("host: wrote %s (%d rows); least squares: revenue = %.4f * ad_spend + %.4f" % (host_csv, len(rows), want_slope, want_intercept))

    nsbox = Client(socket_path=args.socket)
    with nsbox.session(rootfs=args.rootfs, limits={"memory_bytes": 1 << 30, "timeout_ms": 120000}) as s:
        agent = Agent(s)

        # 2. File access: exactly one file crosses into the sandbox.
        with open(host_csv, "rb") as f:
            s.upload("sales.csv", f)
        print("host: handed sales.csv to session %s" % s.id)
        iso = agent.json_cell(
            "import json, os, socket\n"
            "def net():\n"
            "    try:\n"
            "        socket.create_connection(('1.1.1.1', 53), timeout=2).close()\n"
            "        return 'reachable'\n"
            "    except OSError as e:\n"
            "        return type(e).__name__\n"
            "host_file = %r\n"
            "try:\n"
            "    open(host_file).read()\n"
            "    host_read = 'read'\n"
            "except OSError as e:\n"
            "    host_read = type(e).__name__\n"
            "print(json.dumps({'cwd': os.getcwd(), 'workspace': sorted(os.listdir('.')), 'host_read': host_read,\n"
            "                  'host_dir_exists': os.path.exists(%r), 'net': net()}))" % (host_csv, host_dir))
        assert iso["cwd"] == "/workspace", iso
        assert "sales.csv" in iso["workspace"], iso
        assert iso["host_read"] == "FileNotFoundError", "the host path must not be readable: %s" % iso
        assert iso["host_dir_exists"] is False, iso
        assert iso["net"] != "reachable", "the sandbox must have no network: %s" % iso
        try:
            s.download("../" + host_csv.lstrip("/"))
            raise AssertionError("a path outside /workspace was served")
        except Exception as e:  # InvalidArgument, raised before any request leaves
            assert type(e).__name__ == "InvalidArgument", repr(e)
        print("host: the sandbox sees only /workspace/sales.csv: host path %s, network %s" % (iso["host_read"], iso["net"]))

        # 3. The analysis, one checked cell at a time.
        r = agent.cell("import pandas as pd, numpy as np\ndf = pd.read_csv('sales.csv')\ndf.shape")
        assert r.value == "(%d, 3)" % ROWS, r.value

        stats = agent.json_cell(
            "summary = df.describe()\n"
            "print(summary.round(3).to_string())\n"
            "print(json.dumps({'mean': df[['ad_spend', 'revenue']].mean().to_dict(),\n"
            "                  'std': df['revenue'].std(), 'by_region': df.groupby('region')['revenue'].mean().to_dict(),\n"
            "                  'nulls': int(df.isna().sum().sum())}))")
        assert abs(stats["mean"]["ad_spend"] - statistics.fmean(xs)) < 1e-9, stats
        assert abs(stats["mean"]["revenue"] - statistics.fmean(ys)) < 1e-9, stats
        assert abs(stats["std"] - statistics.stdev(ys)) < 1e-9, stats
        assert stats["nulls"] == 0
        for reg in REGIONS:
            assert abs(stats["by_region"][reg] - want_means[reg]) < 1e-9, (reg, stats)

        fit = agent.json_cell(
            "slope, intercept = np.polyfit(df.ad_spend, df.revenue, 1)\n"
            "pred = slope * df.ad_spend + intercept\n"
            "r2 = 1 - ((df.revenue - pred) ** 2).sum() / ((df.revenue - df.revenue.mean()) ** 2).sum()\n"
            "print(json.dumps({'slope': slope, 'intercept': intercept, 'r2': r2}))")
        assert abs(fit["slope"] - want_slope) < 1e-9 and abs(fit["intercept"] - want_intercept) < 1e-9, fit
        assert abs(fit["slope"] - SLOPE) < 0.2 and abs(fit["intercept"] - INTERCEPT) < 0.6, "the fit misses the generating line: %s" % fit
        assert 0.9 < fit["r2"] <= 1, fit

        r = agent.cell(
            "import matplotlib.pyplot as plt\n"
            "fig, ax = plt.subplots(figsize=(6, 4), dpi=100)\n"
            "for region, g in df.groupby('region'):\n"
            "    ax.scatter(g.ad_spend, g.revenue, s=8, label=region)\n"
            "xs = np.linspace(0, 10, 50)\n"
            "ax.plot(xs, slope * xs + intercept, color='black', label='fit')\n"
            "ax.set_xlabel('ad spend'); ax.set_ylabel('revenue'); ax.legend()\n"
            "fig.savefig('fit.png')\n"
            "plt.show()\n"
            "fig, ax = plt.subplots(figsize=(5, 3), dpi=100)\n"
            "ax.hist(df.revenue - pred, bins=20)\n"
            "ax.set_title('residuals')\n"
            "fig.savefig('residuals.png')")
        assert len(r.figures) == 2, "want two figures, got %d" % len(r.figures)
        sizes = [check_png(png, want) for png, want in zip(r.figures, [(600, 400), (500, 300)])]
        changed = {f["path"] for f in r.files or []}
        assert {"fit.png", "residuals.png"} <= changed, changed

        # The agent hands the plots back to the host.
        for name, want in (("fit.png", (600, 400)), ("residuals.png", (500, 300))):
            data = s.download(name)
            check_png(data, want)
            with open(os.path.join(out_dir, name), "wb") as f:
                f.write(data)
        print("host: figures %s decoded; fit.png and residuals.png saved in %s" % (sizes, out_dir))

    os.remove(host_csv)
    os.rmdir(host_dir)
    print("all checks passed: revenue = %.3f * ad_spend + %.3f (r2 %.3f)" % (fit["slope"], fit["intercept"], fit["r2"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
