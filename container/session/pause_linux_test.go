package session

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/clock/clocktest"
	"github.com/nsbox/nsbox/container/runner"
)

// cpuOf returns the session's sandbox CPU time now.
func cpuOf(t *testing.T, s *Session) time.Duration {
	t.Helper()
	st, err := s.r.Sandbox().Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st.CPUUsage
}

// passes waits up to 60 s for the spinning thread's count n[0] to move on
// and says whether it did.
const passes = "import time\nfirst, end = n[0], time.monotonic() + 60\nwhile n[0] == first and time.monotonic() < end:\n    time.sleep(0.001)\nn[0] != first"

// TestPauseResume: a paused session's busy background thread uses no CPU
// and makes no progress; resumed, it goes on where it was, with its
// state; an exec on a paused session resumes it first.
func TestPauseResume(t *testing.T) {
	m, _ := newManager(t, Config{})
	s := create(t, m, Options{})
	run(t, s, "import threading\nn = [0]\ndef spin():\n    while True:\n        n[0] += 1\nthreading.Thread(target=spin, daemon=True).start()")
	counted := run(t, s, passes) // the thread spins: pausing freezes a busy thread
	if counted.Value != "True" {
		t.Fatalf("the thread did not count in 60 s: %+v", counted.Result)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := s.Pause(); err != nil {
		t.Fatalf("pausing a paused session: %v", err)
	}
	info := s.Info()
	if info.State != StatePaused || info.Paused.IsZero() {
		t.Fatalf("info %+v, want paused", info)
	}
	before := cpuOf(t, s)
	time.Sleep(300 * time.Millisecond)
	if used := cpuOf(t, s) - before; used > 5*time.Millisecond {
		t.Errorf("a paused session used %v of CPU in 300 ms", used)
	}
	if err := s.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := s.Info().State; st != StateIdle {
		t.Fatalf("state %s after Resume, want idle", st)
	}
	if res := run(t, s, passes); res.Value != "True" {
		t.Fatalf("the thread did not count in 60 s after Resume: %+v", res.Result)
	}

	// An exec on a paused session thaws it and runs.
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if res := run(t, s, "n[0] > 0"); res.Value != "True" {
		t.Fatalf("exec on a paused session: %+v", res.Result)
	}
	if st := s.Info().State; st != StateIdle {
		t.Fatalf("state %s after an exec, want idle", st)
	}
}

// TestPauseRefusals: a running exec is not paused under it, a dead session
// cannot be paused, and deleting a paused session ends it and its sandbox.
func TestPauseRefusals(t *testing.T) {
	m, _ := newManager(t, Config{})
	s := create(t, m, Options{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Busy until the test has tried the pause: it opens the gate after.
		_, _ = s.Exec(context.Background(), runner.ExecRequest{Timeout: time.Minute,
			Code: "import os, time\nwhile not os.path.exists('gate'): time.sleep(0.01)"})
	}()
	deadline := time.Now().Add(time.Minute)
	for s.Info().State != StateBusy && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := s.Pause(); !errors.Is(err, ErrBusy) {
		t.Errorf("Pause during an exec: %v, want ErrBusy", err)
	}
	if err := s.WriteFile(context.Background(), "gate", nil, 0o644); err != nil {
		t.Fatalf("open the gate: %v", err)
	}
	<-done
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(s.ID()); err != nil {
		t.Fatalf("Delete of a paused session: %v", err)
	}
	select {
	case <-s.r.Sandbox().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the paused session's sandbox outlived its Delete by 10 s")
	}
	if err := s.Pause(); !errors.Is(err, ErrDead) {
		t.Errorf("Pause of a deleted session: %v, want ErrDead", err)
	}
}

// TestIdlePause: with idle_action pause, an idle session is paused at its
// idle timeout instead of ending, and the next exec finds its state.
func TestIdlePause(t *testing.T) {
	clk := clocktest.New(time.Now())
	m, _ := newManager(t, Config{Clock: clk})
	s := create(t, m, Options{IdleTimeout: 300 * time.Millisecond, IdleAction: IdlePause})
	run(t, s, "x = 7")
	clk.Advance(299 * time.Millisecond)
	if st := s.Info().State; st != StateIdle {
		t.Fatalf("state %s 1 ms before the idle timeout, want idle", st)
	}
	clk.Advance(time.Millisecond)
	if st := s.Info().State; st != StatePaused {
		t.Fatalf("state %s at the idle timeout, want paused", st)
	}
	clk.Advance(600 * time.Millisecond) // two more idle timeouts: it stays paused, not ended
	if st := s.Info().State; st != StatePaused {
		t.Fatalf("state %s, want still paused", st)
	}
	if res := run(t, s, "x"); res.Value != "7" {
		t.Fatalf("x = %q after the idle pause", res.Value)
	}
}

// BenchmarkPauseResume measures one pause and one resume of an idle
// session (the target: 5 ms each).
func BenchmarkPauseResume(b *testing.B) {
	m, _ := newManager(b, Config{})
	s := create(b, m, Options{})
	ctx := context.Background()
	var pause, resume time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := s.Pause(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := s.Resume(ctx); err != nil {
			b.Fatal(err)
		}
		pause, resume = pause+t1.Sub(t0), resume+time.Since(t1)
	}
	b.ReportMetric(float64(pause.Microseconds())/float64(b.N), "pause-µs/op")
	b.ReportMetric(float64(resume.Microseconds())/float64(b.N), "resume-µs/op")
}
