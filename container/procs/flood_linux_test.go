package procs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/procs"
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
	procs.SetSlowTimeout(a, 300*time.Millisecond)
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
