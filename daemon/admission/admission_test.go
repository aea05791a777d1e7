package admission

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/clock/clocktest"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// TestRetryAfterFollowsTheQueue: a refused client is told to come back
// when the queue ahead of it has drained (the mean holding time, times
// the queued runs plus itself, over the slots), from the daemon's first
// runs on: a fresh Gate neither says 1 s for lack of a finished run nor
// starts a moving average at 0 (which said 2 s where the formula gives
// 15 s).
func TestRetryAfterFollowsTheQueue(t *testing.T) {
	clk := clocktest.New(time.Unix(1e9, 0))
	a := New(2, 4, clk)
	if got := a.retryAfter(); got != time.Second {
		t.Errorf("nothing held, nothing learned: %v, want the 1s floor", got)
	}
	r1, err := a.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		a.queue <- struct{}{}
	}
	clk.Advance(6 * time.Second)
	_, err = a.Acquire(context.Background())
	var be *BusyError
	if !errors.As(err, &be) || !errors.Is(err, ErrBusy) || !errors.Is(err, errdefs.ErrExhausted) {
		t.Fatalf("acquire with slots and queue full: %v, want a BusyError of class exhausted", err)
	}
	if be.RetryAfter != 15*time.Second { // held 6 s so far * (4 queued + 1) / 2 slots
		t.Errorf("before any run finished, two holding 6 s, 4 queued: %v, want 15s", be.RetryAfter)
	}
	r1() // the first holding: 6 s
	r3, err := a.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := a.retryAfter(); got != 15*time.Second {
		t.Errorf("one run held its slot 6 s: %v, want 15s", got)
	}
	clk.Advance(2 * time.Second)
	// The second holding: 2 s, a mean of 4 s; 4 s * 5 / 2.
	r3()
	if got := a.retryAfter(); got != 10*time.Second {
		t.Errorf("holdings of 6 s and 2 s: %v, want 10s", got)
	}
	a.held = time.Hour
	if got := a.retryAfter(); got != time.Minute {
		t.Errorf("%v, want the 1 minute cap", got)
	}
}

// TestGate checks the counts and the release: a slot given back twice is
// given back once, and a wait that is cancelled gives up its queue place.
func TestGate(t *testing.T) {
	a := New(1, 1, nil)
	release, err := a.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if a.InFlight() != 1 || a.Queued() != 0 || a.Slots() != 1 {
		t.Fatalf("in flight %d, queued %d, slots %d: want 1, 0, 1", a.InFlight(), a.Queued(), a.Slots())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled while queued: %v, want context.Canceled", err)
	}
	if _, err := a.AcquireWaiting(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("AcquireWaiting cancelled: %v, want context.Canceled", err)
	}
	if a.Queued() != 0 {
		t.Errorf("a cancelled wait kept its queue place: queued %d", a.Queued())
	}
	release()
	release() // a no-op, not a second slot given back
	if a.InFlight() != 0 {
		t.Fatalf("after release: in flight %d", a.InFlight())
	}
	r1, err := a.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer r1()
	if a.InFlight() != 1 {
		t.Errorf("in flight %d after a second acquire, want 1", a.InFlight())
	}
}

// TestDrain: at Drain every run waiting for a slot (queued, or a batch's
// waiting however full the queue is) is answered ErrShuttingDown, of
// class unavailable, and none of them takes the slot given back after
// it; the run holding a slot keeps it until its release.
func TestDrain(t *testing.T) {
	a := New(1, 3, nil)
	held, err := a.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 4)
	for i := range 4 {
		acquire := a.Acquire
		if i == 3 {
			acquire = a.AcquireWaiting
		}
		go func() {
			rel, err := acquire(context.Background())
			if err == nil {
				rel()
				err = errors.New("took a slot")
			}
			errc <- err
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); a.Queued() != 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("queued %d, want 3", a.Queued())
		}
	}
	a.Drain()
	a.Drain() // twice is once
	held()
	timeout := time.After(10 * time.Second)
	for range 4 {
		select {
		case err := <-errc:
			if !errors.Is(err, ErrShuttingDown) || !errors.Is(err, errdefs.ErrUnavailable) {
				t.Errorf("a waiting run at the drain: %v, want ErrShuttingDown (unavailable)", err)
			}
		case <-timeout:
			t.Fatalf("waiting runs still waiting 10 s after the drain (in flight %d, queued %d)", a.InFlight(), a.Queued())
		}
	}
	if a.InFlight() != 0 || a.Queued() != 0 {
		t.Errorf("after the drain: in flight %d, queued %d", a.InFlight(), a.Queued())
	}
	for name, acquire := range map[string]func(context.Context) (func(), error){"Acquire": a.Acquire, "AcquireWaiting": a.AcquireWaiting} {
		rel, err := acquire(context.Background())
		if err == nil {
			rel()
		}
		if !errors.Is(err, ErrShuttingDown) {
			t.Errorf("%s after the drain, with a free slot: %v, want ErrShuttingDown", name, err)
		}
	}
}
