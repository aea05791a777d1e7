package runner

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/internal/testenv"
)

// flood writes 64 KiB chunks to stdout for ever; a chunk is also the most
// a live stream may get past the cap.
const (
	flood      = "import sys\nwhile True: sys.stdout.write('y' * 65536)"
	floodChunk = 65536
	floodCap   = 256 << 10
)

// floodExec runs code with a small output cap and a long timeout, and
// returns its result and the bytes the live callback received.
func floodExec(t *testing.T, r *Runner, code string, kill bool) (*Result, int64) {
	t.Helper()
	var mu sync.Mutex
	var streamed int64
	res := execReq(t, r, ExecRequest{
		Code: code, Timeout: 10 * time.Minute, OutputBytes: floodCap, KillOnOverflow: kill,
		OnStdout: func(b []byte) { mu.Lock(); streamed += int64(len(b)); mu.Unlock() },
	})
	mu.Lock()
	defer mu.Unlock()
	// The cap, not the clock, ends the flood: output_limit, never timeout
	// (a wall-time bound would fail on a busy machine, not on a bug).
	if res.Status != StatusOutputLimit || !res.StdoutTruncated {
		t.Fatalf("flood: status %q truncated %v wall %s, want output_limit (stdout %d bytes)",
			res.Status, res.StdoutTruncated, res.Wall, res.StdoutBytes)
	}
	t.Logf("flood stopped after %s: %d bytes produced, %d streamed", res.Wall, res.StdoutBytes, streamed)
	if streamed > floodCap+floodChunk || int64(len(res.Stdout)) != floodCap {
		t.Fatalf("flood: %d bytes streamed and %d kept, want at most %d streamed and %d kept", streamed, len(res.Stdout), floodCap+floodChunk, floodCap)
	}
	return res, streamed
}

// A cell that floods its output past the exec's cap is interrupted like a
// timeout: output_limit, and the session's interpreter lives on.
func TestOutputFloodInterruptsCell(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.Rootfs(t))
	exec(t, r, "x = 7")
	res, _ := floodExec(t, r, flood, false)
	if res.Killed || res.Exception == nil || res.Exception.Name != "KeyboardInterrupt" {
		t.Fatalf("flood: killed %v exception %+v, want an interrupted cell", res.Killed, res.Exception)
	}
	if got := exec(t, r, "x"); got.Status != StatusOK || got.Value != "7" || len(got.Stdout) != 0 {
		t.Fatalf("after the flood: %+v", got)
	}
}

// A flood that ignores its interrupt is killed soon after it: the cap must
// not hold a CPU until the timeout.
func TestOutputFloodIgnoringInterruptIsKilled(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.Rootfs(t))
	code := "import sys\nwhile True:\n    try:\n        sys.stdout.write('y' * 65536)\n    except KeyboardInterrupt:\n        pass"
	res, _ := floodExec(t, r, code, false)
	if !res.Killed {
		t.Fatalf("flood ignoring its interrupt: %+v, want killed", res)
	}
	if st, _ := r.Dead(); st != StatusOutputLimit {
		t.Fatalf("Dead() = %q, want output_limit", st)
	}
}

// With KillOnOverflow (a one-shot run) the sandbox is killed at the cap.
func TestOutputFloodKillsOneShot(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.Rootfs(t))
	res, _ := floodExec(t, r, flood, true)
	if !res.Killed {
		t.Fatalf("one-shot flood: %+v, want killed", res)
	}
	if st, _ := r.Dead(); st != StatusOutputLimit {
		t.Fatalf("Dead() = %q, want output_limit", st)
	}
	cres, err := r.Close()
	if err != nil || cres.Status != container.StatusOutputLimit {
		t.Fatalf("sandbox result %+v, %v; want output_limit", cres, err)
	}
}

// A background process that floods between cells passes the runner's
// lifetime cap (LimitOutput): the sandbox is killed, output_limit.
func TestLifetimeOutputCapKills(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.Rootfs(t))
	r.LimitOutput(1 << 20)
	exec(t, r, "import subprocess, sys\np = subprocess.Popen([sys.executable, '-c', \"import sys\\nwhile True: sys.stdout.write('y' * 65536)\"])")
	select {
	case <-r.Sandbox().Done():
	case <-time.After(time.Minute):
		t.Fatal("a background flood past the lifetime cap did not end the sandbox")
	}
	if st, _ := r.Dead(); st != StatusOutputLimit {
		t.Fatalf("Dead() = %q, want output_limit", st)
	}
}

// A cell that forks: only the runner answers, the child leaves quietly,
// and every later cell answers its own code.
func TestForkInCell(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.Rootfs(t))
	res := exec(t, r, "import os\npid = os.fork()\n'child' if pid == 0 else 'parent'")
	if res.Status != StatusOK || res.Value != "'parent'" {
		t.Fatalf("fork cell: %+v", res)
	}
	for _, v := range []string{"second", "third"} {
		res := exec(t, r, "print('out')\n'"+v+"'")
		if res.Status != StatusOK || res.Value != "'"+v+"'" || string(res.Stdout) != "out\n" {
			t.Fatalf("cell %q after a fork: value %q stdout %q (%+v)", v, res.Value, res.Stdout, res)
		}
	}
	// A child that raises, or prints, ends there; its output is the cell's.
	res = exec(t, r, "import os\npid = os.fork()\nif pid == 0:\n    print('from child', flush=True)\n    raise ValueError('child fails')\nos.waitpid(pid, 0)[1] >> 8")
	if res.Status != StatusOK || res.Value != "1" || !strings.Contains(string(res.Stdout), "from child") ||
		!strings.Contains(string(res.Stderr), "ValueError: child fails") || strings.Contains(string(res.Stdout)+string(res.Stderr), "nsbox-end") {
		t.Fatalf("fork with a failing child: %+v stdout %q stderr %q", res, res.Stdout, res.Stderr)
	}
	if res := exec(t, r, "'last'"); res.Value != "'last'" {
		t.Fatalf("last cell: %+v", res)
	}
}

// multiprocessing forks workers from the runner: it works within the
// default pids limit, and the next cell answers its own code.
func TestMultiprocessingInCell(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.Rootfs(t), func(s *container.Spec) { s.Limits.Pids = container.DefaultLimits().Pids })
	res := exec(t, r, "import multiprocessing\nwith multiprocessing.Pool(2) as p:\n    v = p.map(abs, [-1, -2])\nv")
	if res.Status != StatusOK || res.Value != "[1, 2]" {
		t.Fatalf("Pool.map: %+v stderr %s", res, res.Stderr)
	}
	res = exec(t, r, "multiprocessing.Pool(2).map(abs, [-3, -4])")
	if res.Status != StatusOK || res.Value != "[3, 4]" {
		t.Fatalf("unclosed Pool.map: %+v stderr %s", res, res.Stderr)
	}
	if res := exec(t, r, "'next'"); res.Status != StatusOK || res.Value != "'next'" {
		t.Fatalf("cell after multiprocessing: %+v", res)
	}
}
