package session

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/container/runner"
)

// An exec that floods past its output cap is interrupted (output_limit)
// and the session lives on with its state.
func TestOutputFloodKeepsSession(t *testing.T) {
	m, _ := newManager(t, Config{})
	s := create(t, m, Options{Limits: container.Limits{Timeout: 10 * time.Minute, OutputBytes: 64 << 10}})
	run(t, s, "x = 1")
	res, err := s.Exec(context.Background(), runner.ExecRequest{Code: "import sys\nwhile True: sys.stdout.write('y' * 65536)"})
	if err != nil || res.Status != runner.StatusOutputLimit || res.Killed || len(res.Stdout) != 64<<10 {
		t.Fatalf("flood: %+v, %v; want output_limit at 64 KiB (the cap ends it, not the clock)", res, err)
	}
	if res := run(t, s, "x"); res.Status != runner.StatusOK || res.Value != "1" || s.Info().State != StateIdle {
		t.Fatalf("after the flood: %+v, state %s", res.Result, s.Info().State)
	}
}

// Output between execs counts towards the session's lifetime cap: a
// background flood past it ends the session, dead with output_limit.
func TestLifetimeOutputEndsSession(t *testing.T) {
	m, _ := newManager(t, Config{OutputBytes: 1 << 20})
	s := create(t, m, Options{})
	run(t, s, "import subprocess, sys\np = subprocess.Popen([sys.executable, '-c', \"import sys\\nwhile True: sys.stdout.write('y' * 65536)\"])")
	deadline := time.Now().Add(time.Minute)
	for s.Info().State != StateDead {
		if time.Now().After(deadline) {
			t.Fatal("a background flood past the session's lifetime cap did not end it")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if info := s.Info(); info.DeadStatus != runner.StatusOutputLimit {
		t.Fatalf("dead %s: %s, want output_limit", info.DeadStatus, info.DeadReason)
	}
}

// A cell that passes its output cap through processes it started (a child,
// and a grandchild its parent left behind) has them killed with it: the
// result says so, the next execs get only their own output, and the
// session lives on (no lifetime cap reached by the writers). A command of
// the process agent, which writes to pipes of its own, is spared.
func TestOutputCapKillsBackgroundWriters(t *testing.T) {
	// The lifetime cap is 1 GiB, far past what the writers can write
	// before the cut even on a loaded machine (with 8 MiB, two tight
	// writers passed it before the cut under two busy loops, and the cap,
	// rightly, ended the session).
	m, _ := newManager(t, Config{OutputBytes: 1 << 30})
	s := create(t, m, Options{Processes: true, Limits: container.Limits{Timeout: time.Minute, OutputBytes: 64 << 10}})
	a, err := s.Procs()
	if err != nil {
		t.Fatalf("Procs: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd, err := a.Start(ctx, procs.Config{Cmd: "sh", Args: []string{"-c", "read line; echo got $line"}, Stdin: true})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	const flood = `import sys\nwhile True: sys.stdout.write('y' * 4096); sys.stdout.flush()`
	res := run(t, s, "import os, subprocess, sys, time\n"+
		"subprocess.Popen([sys.executable, '-c', '''import os, sys\nif os.fork() == 0:\n    "+flood+"\n'''])\n"+
		"subprocess.Popen([sys.executable, '-c', \""+flood+"\"])\n"+
		"time.sleep(60)")
	// Two writers, and the grandchild's parent when it had not exited yet.
	if res.Status != runner.StatusOutputLimit || res.Killed || !strings.Contains(res.Error, "process(es) it started that went on writing") {
		t.Fatalf("flood: %s killed=%v %q; want output_limit, alive, the writers killed", res.Status, res.Killed, res.Error)
	}
	for i := range 5 {
		res := run(t, s, fmt.Sprintf("print('own %d')", i))
		if res.Status != runner.StatusOK || string(res.Stdout) != fmt.Sprintf("own %d\n", i) || len(res.Stderr) != 0 {
			t.Fatalf("exec %d after the flood: %s stdout %d bytes %.80q stderr %d bytes", i, res.Status, len(res.Stdout), res.Stdout, len(res.Stderr))
		}
	}
	if info := s.Info(); info.State != StateIdle {
		t.Fatalf("after the flood: %s (%s)", info.State, info.DeadReason)
	}
	if err := a.SendInput(ctx, procs.Selector{Pid: cmd.Pid}, []byte("x\n")); err != nil {
		t.Fatalf("the agent's command after the cut: %v", err)
	}
	var out []byte
	for {
		ev, err := cmd.Next(ctx)
		if err != nil {
			t.Fatalf("the agent's command after the cut: %v (output %q)", err, out)
		}
		if ev.Data != nil {
			out = append(out, ev.Data.Stdout...)
		}
		if ev.End != nil {
			if string(out) != "got x\n" || ev.End.ExitCode != 0 {
				t.Fatalf("the agent's command after the cut: %+v, output %q", ev.End, out)
			}
			return
		}
	}
}

// A cell that passes its output cap through a thread it started has its
// threads ended with it (SystemExit raised in each; one in a sleep at its
// end): the result says so, and the next execs get only their own output
// from a live session.
func TestOutputCapStopsThreadWriters(t *testing.T) {
	m, _ := newManager(t, Config{OutputBytes: 1 << 30}) // as above: far past what the writer can do before the cut
	s := create(t, m, Options{Limits: container.Limits{Timeout: time.Minute, OutputBytes: 64 << 10}})
	run(t, s, "import threading, time\nkeep = threading.Thread(target=time.sleep, args=(600,), daemon=True)\nkeep.start()")
	res := run(t, s, "import sys, threading, time\n"+
		"def w():\n    while True: sys.stdout.write('y' * 4096); sys.stdout.flush()\n"+
		"def s():\n    while True: time.sleep(600); print('tick')\n"+
		"threading.Thread(target=s, daemon=True).start()\n"+
		"threading.Thread(target=w, daemon=True).start()\ntime.sleep(60)")
	// The sleeping one ends when its sleep returns, before it writes.
	if res.Status != runner.StatusOutputLimit || res.Killed || !strings.Contains(res.Error, "2 thread(s) it started were stopped") {
		t.Fatalf("flood: %s killed=%v %q; want output_limit, alive, its two threads stopped", res.Status, res.Killed, res.Error)
	}
	for i := range 5 {
		res := run(t, s, fmt.Sprintf("print('own %d')", i))
		if res.Status != runner.StatusOK || string(res.Stdout) != fmt.Sprintf("own %d\n", i) || len(res.Stderr) != 0 {
			t.Fatalf("exec %d after the flood: %s stdout %d bytes %.80q stderr %d bytes", i, res.Status, len(res.Stdout), res.Stdout, len(res.Stderr))
		}
	}
	// A thread an earlier cell started is not the flood's: it lives on.
	if res := run(t, s, "keep.is_alive()"); res.Value != "True" {
		t.Fatalf("the earlier cell's thread: is_alive() = %q", res.Value)
	}
}
