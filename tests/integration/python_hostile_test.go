package integration

import (
	"context"
	"fmt"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
)

// A Python output flood, and the most a live stream may get past the cap
// (one chunk).
const (
	pyFlood      = "import sys\nwhile True: sys.stdout.write('y' * 65536)"
	pyFloodCap   = 256 << 10
	pyFloodChunk = 64 << 10
)

// floodRun streams a Python flood on rootfs with a 256 KiB cap and a 20 s
// timeout: the daemon must stop it at the cap, far within the timeout, and
// stream no more than the cap (and a chunk).
func floodRun(t *testing.T, d *daemon, rootfs string) *agentapi.RunResult {
	t.Helper()
	var streamed int
	res, err := d.client.RunStream(context.Background(), &agentapi.RunRequest{Language: "python", Rootfs: rootfs, Code: pyFlood,
		Limits: &agentapi.Limits{TimeoutMs: 20000, OutputBytes: pyFloodCap}}, func(ev agentapi.Event) {
		if ev.Type == agentapi.EventStdout {
			streamed += len(ev.Data) + len(ev.DataBase64)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// wall_ms is the daemon's own account of the run.
	if res.Status != agentapi.StatusOutputLimit || !res.StdoutTruncated || len(res.Stdout) != pyFloodCap || res.WallMs > 5000 {
		t.Fatalf("flood: status %s truncated %v, %d bytes kept of %d, wall %d ms; want output_limit at %d bytes well within the 20 s timeout",
			res.Status, res.StdoutTruncated, len(res.Stdout), res.StdoutBytes, res.WallMs, pyFloodCap)
	}
	t.Logf("flood on %s: wall_ms %d, %d bytes produced, %d streamed, pooled %v", rootfs, res.WallMs, res.StdoutBytes, streamed, res.Pooled)
	if streamed > pyFloodCap+pyFloodChunk {
		t.Fatalf("flood: %d bytes streamed, want at most %d", streamed, pyFloodCap+pyFloodChunk)
	}
	d.waitIdle(t) // its slot is free again
	return res
}

// forkChecks forks in a session on rootfs and in a run: a raw os.fork, then
// multiprocessing within the default pids limit; every exec answers its own
// code.
func forkChecks(t *testing.T, d *daemon, rootfs string) {
	t.Helper()
	id := newSession(t, d, &agentapi.SessionRequest{Rootfs: rootfs})
	if r := execOK(t, d, id, "import os\npid = os.fork()\n'child' if pid == 0 else 'parent'"); r.Value != "'parent'" {
		t.Fatalf("fork cell: %+v", r)
	}
	for _, v := range []string{"second", "third"} {
		if r := execOK(t, d, id, "print('"+v+"')\n'"+v+"'"); r.Value != "'"+v+"'" || r.Stdout != v+"\n" {
			t.Fatalf("exec %q after a fork: value %q stdout %q", v, r.Value, r.Stdout)
		}
	}
	if r := execOK(t, d, id, "import multiprocessing\nmultiprocessing.Pool(2).map(abs, [-1, -2])"); r.Value != "[1, 2]" {
		t.Fatalf("multiprocessing in a session: %+v", r)
	}
	if r := execOK(t, d, id, "'next'"); r.Value != "'next'" {
		t.Fatalf("exec after multiprocessing: %+v", r)
	}
	if err := d.client.DeleteSession(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	res, err := d.client.Run(context.Background(), &agentapi.RunRequest{Language: "python", Rootfs: rootfs,
		Code: "import multiprocessing, os\nos.fork() or os.wait()\nwith multiprocessing.Pool(2) as p:\n    print(p.map(abs, [-1, -2]))"})
	if err != nil || res.Status != agentapi.StatusOK || res.Stdout != "[1, 2]\n" {
		t.Fatalf("fork and multiprocessing in a run: %+v %v", res, err)
	}
}

// Cold runs and sessions on the minimal rootfs: a flood stops at the cap,
// forks and multiprocessing work.
func TestPythonFloodAndFork(t *testing.T) {
	d := startDaemon(t)
	_, name := testRootfs(t)
	if res := floodRun(t, d, name); res.Pooled {
		t.Fatalf("run took a pooled runner on a daemon without a pool")
	}
	forkChecks(t, d, name)
	d.assertClean(t)
}

// A pooled run's flood stops at the cap too.
func TestPythonFloodPooled(t *testing.T) {
	d := startDaemon(t, "--pool-size", "1")
	d.waitPoolReady(t)
	_, name := testRootfs(t)
	if res := floodRun(t, d, name); !res.Pooled {
		t.Fatalf("flood did not take the pooled runner")
	}
}

// On a zygote's rootfs runs and sessions are the zygote's children: the
// flood and fork fixes hold there too.
func TestPythonFloodAndForkOnZygote(t *testing.T) {
	name := dataSciRootfs(t)
	d := startDaemon(t, "--config", writeConf(t, fmt.Sprintf("[zygote]\nrootfs = [%q]\n", name)))
	d.waitZygote(t, 0)
	floodRun(t, d, name)
	forkChecks(t, d, name)
	d.checkForked(t, 3) // the runs and the session
}
