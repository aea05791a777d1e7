package admission

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nsbox/nsbox/daemon/errdefs"
)

// TestRetryAfterFollowsTheQueue: a refused client is told to come back
// when the queue ahead of it has drained, not always after a second.
func TestRetryAfterFollowsTheQueue(t *testing.T) {
	a := New(2, 4)
	if got := a.retryAfter(); got != time.Second {
		t.Errorf("nothing learned yet: %v, want the 1s floor", got)
	}
	a.held = 4 * time.Second
	for range 2 {
		a.slots <- struct{}{}
	}
	for range 4 {
		a.queue <- struct{}{}
	}
	if got := a.retryAfter(); got != 10*time.Second { // 4 s * (4 queued + 1) / 2 slots
		t.Errorf("4 queued, slots held 4 s, 2 slots: %v, want 10s", got)
	}
	a.held = time.Hour
	if got := a.retryAfter(); got != time.Minute {
		t.Errorf("%v, want the 1 minute cap", got)
	}
	_, err := a.Acquire(context.Background())
	var be *BusyError
	if !errors.As(err, &be) || be.RetryAfter != time.Minute || !errors.Is(err, ErrBusy) || !errors.Is(err, errdefs.ErrExhausted) {
		t.Errorf("acquire with slots and queue full: %v, want a BusyError with the hint, of class exhausted", err)
	}
}

// TestGate checks the counts and the release: a slot given back twice is
// given back once, and a wait that is cancelled gives up its queue place.
func TestGate(t *testing.T) {
	a := New(1, 1)
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
