package integration

import (
	"context"
	"io"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
)

// waitPoolReady polls /v1/info until every pool is full.
func (d *daemon) waitPoolReady(t *testing.T) agentapi.PoolInfo {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		info, err := d.client.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Pools) == 0 {
			t.Fatal("no pool in /v1/info")
		}
		p := info.Pools[0]
		if p.Ready == p.Size {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool not full: %+v", p)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// escapeProbes are attacks and limits every kind of sandbox must hold
// (pooled runs, forked and revived sessions): each a Python cell and the
// status and output it must end with.
var escapeProbes = []struct{ name, code, status, stdout string }{
	{name: "rootfs read-only", code: "import os\nprint('ro', bool(os.statvfs('/').f_flag & os.ST_RDONLY))\ntry:\n    open('/usr/probe', 'w')\nexcept OSError as e:\n    print('refused', e.errno)",
		status: agentapi.StatusOK, stdout: "ro True\nrefused"},
	{name: "uid 1000, no caps, seccomp", code: "s = open('/proc/self/status').read()\nprint([l.split()[1:] for l in s.splitlines() if l.split(':')[0] in ('Uid', 'CapEff', 'CapPrm', 'Seccomp')])",
		status: agentapi.StatusOK, stdout: "[['1000', '1000', '1000', '1000'], ['0000000000000000'], ['0000000000000000'], ['2']]"},
	{name: "unshare and mount refused", code: "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nprint('unshare', libc.unshare(0x10000000), 'mount', libc.mount(b'none', b'/tmp', b'tmpfs', 0, None))\nimport subprocess\nprint(subprocess.run(['unshare', '-Ur', 'true']).returncode != 0)",
		status: agentapi.StatusOK, stdout: "unshare -1 mount -1\nTrue"},
	{name: "only lo", code: "import socket\nprint([n for _, n in socket.if_nameindex()])", status: agentapi.StatusOK, stdout: "['lo']"},
	{name: "fork bomb contained", code: "import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            time.sleep(60)\n            os._exit(0)\n        n += 1\nexcept OSError:\n    print('contained', n < 64)",
		status: agentapi.StatusOK, stdout: "contained True"},
	// Last: it ends a session.
	{name: "memory bomb", code: "x = []\nwhile True:\n    x.append(bytearray(1 << 20))", status: agentapi.StatusOOM},
}

// TestPooledIsolation runs the attack and limit checks as pooled runs
// through the daemon: each must be a pool hit and hold like a cold run.
func TestPooledIsolation(t *testing.T) {
	d := startDaemon(t, "--pool-size", "2", "--spare-inits", "1")
	ctx := context.Background()
	marker := randomName("nsbox-pool-bg-")
	type probeCase struct {
		name    string
		code    string
		limits  *agentapi.Limits // timeout and output only: per run, the pool still matches
		status  string
		stdout  string // substring
		idleFor time.Duration
	}
	var tests []probeCase
	for _, p := range escapeProbes {
		tests = append(tests, probeCase{name: p.name, code: p.code, status: p.status, stdout: p.stdout})
	}
	tests = append(tests, []probeCase{
		{name: "infinite loop times out from hand-over", code: "while True:\n    pass", limits: &agentapi.Limits{TimeoutMs: 1000},
			status: agentapi.StatusTimeout, idleFor: 1500 * time.Millisecond},
		{name: "output flood", code: "while True:\n    print('x' * 10000)", limits: &agentapi.Limits{TimeoutMs: 60_000, OutputBytes: 100000},
			status: agentapi.StatusOutputLimit},
		{name: "background process", code: "import subprocess\nsubprocess.Popen(['sh', '-c', 'sleep 600; echo " + marker + "'])\nprint('left')",
			status: agentapi.StatusOK, stdout: "left"},
	}...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := d.waitPoolReady(t)
			time.Sleep(tc.idleFor) // the runner waits in the pool: its time limit must not tick
			res, err := d.client.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: tc.code, Limits: tc.limits})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Pooled {
				t.Errorf("run was not pooled: %+v", res)
			}
			if res.Status != tc.status || !strings.Contains(res.Stdout, tc.stdout) {
				t.Fatalf("status %q stdout %q error %q exception %+v; want %q with %q", res.Status, trimOut(res.Stdout), res.Error, res.Exception, tc.status, tc.stdout)
			}
			if tc.status == agentapi.StatusTimeout && res.WallMs < 1000 {
				t.Errorf("timed out after %d ms, want >= 1000: the limit must count from the hand-over", res.WallMs)
			}
			after := d.waitPoolReady(t)
			if after.Hits != before.Hits+1 || after.Misses != before.Misses {
				t.Errorf("pool hits %d -> %d, misses %d -> %d: want one more hit", before.Hits, after.Hits, before.Misses, after.Misses)
			}
		})
	}
	waitGone(t, marker) // the background process died with its sandbox

	// The pool's own metrics agree.
	resp, err := d.http.Get("http://nsbox/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if want := "nsbox_pool_hits_total{pool=\"default\"} " + strconv.Itoa(len(tests)); !strings.Contains(string(body), want) {
		t.Errorf("metrics lack %q", want)
	}

	if err := d.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
	d.assertClean(t) // pooled runners are gone with the daemon
}

func TestPooledSessionAndPreimport(t *testing.T) {
	d := startDaemon(t, "--pool-size", "1", "--pool-preimport", "json,nsbox_no_such_module")
	ctx := context.Background()
	p := d.waitPoolReady(t)
	if !slices.Equal(p.Preimport, []string{"json", "nsbox_no_such_module"}) || !slices.Equal(p.Skipped, []string{"nsbox_no_such_module"}) {
		t.Errorf("pool info %+v: want preimport json,nsbox_no_such_module with the second skipped", p)
	}
	res, err := d.client.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: "import sys\n'json' in sys.modules and 'json' not in globals()",
		Files: []agentapi.File{{Path: "in/a.txt", Text: "input"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Pooled || res.Value != "True" {
		t.Fatalf("run %+v: want pooled, value True", res)
	}

	d.waitPoolReady(t)
	sess, err := d.client.CreateSession(ctx, &agentapi.SessionRequest{Files: []agentapi.File{{Path: "in.txt", Text: "41"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !sess.Pooled {
		t.Errorf("session %+v not pooled", sess)
	}
	for i, want := range []string{"41", "42"} {
		res, err := d.client.Exec(ctx, sess.ID, &agentapi.ExecRequest{Code: "x = int(open('in.txt').read()) if 'x' not in globals() else x + 1\nx"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Value != want || res.ExecutionCount != i+1 {
			t.Errorf("exec %d: value %q count %d, want %q %d (the preimport must not count)", i, res.Value, res.ExecutionCount, want, i+1)
		}
	}
	if err := d.client.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}

	// A run whose limits differ from the pool's starts cold.
	res, err = d.client.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: "print(1)", Limits: &agentapi.Limits{MemoryBytes: 128 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pooled || res.Status != agentapi.StatusOK {
		t.Errorf("run with other limits: %+v, want cold and ok", res)
	}
	if err := d.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
	d.assertClean(t)
}

// trimOut shortens output for a failure message.
func trimOut(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}
