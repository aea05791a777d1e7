// Package admission bounds how many runs the daemon executes at once: a
// Gate of run slots with a queue of places to wait for one. A request
// that finds both full is refused at once (ErrBusy, as a BusyError with a
// retry hint from how long slots are held); nothing grows without bound.
// The core takes a slot for each run and gives it back when the run's
// answer is out; the metrics read InFlight and Queued.
package admission

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nsbox/nsbox/daemon/errdefs"
)

// ErrBusy: every run slot and queue place is taken.
var ErrBusy = errdefs.New(errdefs.ErrExhausted, "too many runs in flight and queued; retry later or raise --max-concurrent/--queue")

// BusyError is ErrBusy with a hint of when to retry.
type BusyError struct{ RetryAfter time.Duration }

func (e *BusyError) Error() string { return ErrBusy.Error() }
func (e *BusyError) Is(target error) bool {
	return target == ErrBusy || errors.Is(ErrBusy, target)
}

// Gate is slots run slots and a queue of places to wait for one.
type Gate struct {
	slots chan struct{}
	queue chan struct{}

	mu   sync.Mutex
	held time.Duration // moving average of how long a slot is held
}

// New returns a Gate of slots run slots and queue waiting places.
func New(slots, queue int) *Gate {
	return &Gate{slots: make(chan struct{}, slots), queue: make(chan struct{}, queue)}
}

// Acquire takes a run slot, waiting in the queue if there is room there.
// The returned func gives the slot back.
func (a *Gate) Acquire(ctx context.Context) (release func(), err error) {
	select {
	case a.slots <- struct{}{}:
		return a.releaser(), nil
	default:
	}
	select {
	case a.queue <- struct{}{}:
	default:
		return nil, &BusyError{RetryAfter: a.retryAfter()}
	}
	defer func() { <-a.queue }()
	select {
	case a.slots <- struct{}{}:
		return a.releaser(), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a run slot: %w", context.Cause(ctx))
	}
}

// AcquireWaiting takes a run slot, waiting for one however full the queue
// is; its callers bound their own number (RunBatch's workers).
func (a *Gate) AcquireWaiting(ctx context.Context) (release func(), err error) {
	select {
	case a.slots <- struct{}{}:
		return a.releaser(), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a run slot: %w", context.Cause(ctx))
	}
}

// releaser gives the slot back once and learns how long it was held.
func (a *Gate) releaser() func() {
	start := time.Now()
	return sync.OnceFunc(func() {
		d := time.Since(start)
		a.mu.Lock()
		a.held += (d - a.held) / 8
		a.mu.Unlock()
		<-a.slots
	})
}

// retryAfter estimates when a place frees up: everything admitted and
// queued drains through the slots at the mean holding time, plus the one
// asking. A client told this waits its turn instead of hammering.
func (a *Gate) retryAfter() time.Duration {
	a.mu.Lock()
	held := a.held
	a.mu.Unlock()
	d := held * time.Duration(len(a.queue)+1) / time.Duration(cap(a.slots))
	return min(max(d, time.Second), time.Minute).Round(time.Second)
}

// Slots is how many runs may hold a slot at once.
func (a *Gate) Slots() int { return cap(a.slots) }

// InFlight is how many runs hold a slot; Queued how many wait for one.
func (a *Gate) InFlight() int { return len(a.slots) }
func (a *Gate) Queued() int   { return len(a.queue) }
