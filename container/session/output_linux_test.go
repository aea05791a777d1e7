package session

import (
	"context"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/runner"
)

// An exec that floods past its output cap is interrupted (output_limit)
// and the session lives on with its state.
func TestOutputFloodKeepsSession(t *testing.T) {
	m, _ := newManager(t, Config{})
	s := create(t, m, Options{Limits: container.Limits{Timeout: 20 * time.Second, OutputBytes: 64 << 10}})
	run(t, s, "x = 1")
	res, err := s.Exec(context.Background(), runner.ExecRequest{Code: "import sys\nwhile True: sys.stdout.write('y' * 65536)"})
	if err != nil || res.Status != runner.StatusOutputLimit || res.Killed || len(res.Stdout) != 64<<10 || res.Wall > 5*time.Second {
		t.Fatalf("flood: %+v, %v; want output_limit at 64 KiB well within the 20 s timeout", res, err)
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
