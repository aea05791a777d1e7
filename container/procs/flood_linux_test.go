package procs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/container/runner"
)

// A flood read by a slow host completes: the agent stops reading the
// pipes while the host is behind, so the sandbox's memory stays small.
func TestFloodWithBoundedMemory(t *testing.T) {
	r, a := startAgent(t)
	const n = 50 << 20
	p := start(t, a, sh("yes | head -c 52428800"))
	time.Sleep(2 * time.Second) // nobody reads: everything fills up
	o := collect(t, p)
	if o.err != nil || o.end == nil || o.end.ExitCode != 0 || o.stdout.Len() != n {
		t.Fatalf("end %+v err %v: %d bytes, want %d", o.end, o.err, o.stdout.Len(), n)
	}
	st, err := r.Sandbox().Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	t.Logf("sandbox memory peak %d MiB", st.MemoryPeakBytes>>20)
	if st.MemoryPeakBytes > 64<<20 {
		t.Errorf("sandbox memory peak %d MiB for a 50 MiB flood: not bounded", st.MemoryPeakBytes>>20)
	}
}

// A subscriber that stops reading is dropped after SlowTimeout; the other
// subscriber and the other processes go on.
func TestSlowSubscriberIsDropped(t *testing.T) {
	_, a := startAgent(t)
	// Short against the default 10 s, long enough that the subscriber
	// that reads is never that late on a busy machine.
	procs.SetSlowTimeout(a, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := start(t, a, procs.Config{Cmd: "sh", Args: []string{"-c", "yes | head -c 20000000"}, Tag: "flood"})
	slow, err := a.Connect(ctx, procs.Selector{Tag: "flood"})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	o := collect(t, p)
	if o.err != nil || o.end == nil || o.stdout.Len() != 20000000 {
		t.Fatalf("the reading subscriber: end %+v err %v, %d bytes", o.end, o.err, o.stdout.Len())
	}
	q := collect(t, start(t, a, sh("echo other")))
	if q.stdout.String() != "other\n" {
		t.Fatalf("another process after the drop: %q", q.stdout.String())
	}
	n := 0
	for range slow.Events() {
		n++
	}
	if !errors.Is(slow.Err(), procs.ErrSlow) {
		t.Fatalf("the slow subscriber ended with %v after %d events, want ErrSlow", slow.Err(), n)
	}
}

// A command's flood stops at the agent's output cap (issue 35: 200 MiB
// streamed uncapped through E2B's commands): exactly the cap reaches the
// subscriber, the command's group is killed (the shell never gets to its
// next command), and its end says output_limit, the runs' verdict.
func TestOutputCapKillsCommand(t *testing.T) {
	if procs.StatusOutputLimit != string(runner.StatusOutputLimit) {
		t.Fatalf("procs.StatusOutputLimit %q is not the runs' %q", procs.StatusOutputLimit, runner.StatusOutputLimit)
	}
	_, a := startAgent(t)
	const limit = 1 << 20
	a.LimitOutput(limit)
	for _, tc := range []struct{ name, script string }{
		{"stdout", "head -c 200M /dev/zero; echo survived >&2"},
		{"stderr", "head -c 200M /dev/zero >&2; echo survived"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := collect(t, start(t, a, sh(tc.script)))
			flood, other := &o.stdout, &o.stderr
			if tc.name == "stderr" {
				flood, other = other, flood
			}
			if o.err != nil || o.end == nil || o.end.Status != procs.StatusOutputLimit || o.end.ExitCode != -1 || !strings.Contains(o.end.Error, tc.name) {
				t.Fatalf("end %+v err %v, want status %s", o.end, o.err, procs.StatusOutputLimit)
			}
			if flood.Len() != limit || other.Len() != 0 {
				t.Fatalf("%s: %d bytes, the other stream %q; want %d and nothing", tc.name, flood.Len(), other.String(), limit)
			}
		})
	}
	o := collect(t, start(t, a, sh("echo next")))
	if o.stdout.String() != "next\n" || o.end == nil || o.end.Status != "exit status 0" {
		t.Fatalf("the next command: stdout %q end %+v", o.stdout.String(), o.end)
	}
}
