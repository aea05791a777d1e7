package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// admission bounds concurrency: slots runs at once, queue more waiting.
// A request that finds both full is refused at once (ErrBusy, with a retry
// hint from how long slots are held); nothing grows without bound.
type admission struct {
	slots chan struct{}
	queue chan struct{}

	mu   sync.Mutex
	held time.Duration // moving average of how long a slot is held
}

func newAdmission(slots, queue int) *admission {
	return &admission{slots: make(chan struct{}, slots), queue: make(chan struct{}, queue)}
}

// acquire takes a run slot, waiting in the queue if there is room there.
// The returned func gives the slot back.
func (a *admission) acquire(ctx context.Context) (release func(), err error) {
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

// acquireWaiting takes a run slot, waiting for one however full the queue
// is; its callers bound their own number (RunBatch's workers).
func (a *admission) acquireWaiting(ctx context.Context) (release func(), err error) {
	select {
	case a.slots <- struct{}{}:
		return a.releaser(), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a run slot: %w", context.Cause(ctx))
	}
}

// releaser gives the slot back once and learns how long it was held.
func (a *admission) releaser() func() {
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
func (a *admission) retryAfter() time.Duration {
	a.mu.Lock()
	held := a.held
	a.mu.Unlock()
	d := held * time.Duration(len(a.queue)+1) / time.Duration(cap(a.slots))
	return min(max(d, time.Second), time.Minute).Round(time.Second)
}

// InFlight is how many runs hold a slot; Queued how many wait for one.
func (a *admission) InFlight() int { return len(a.slots) }
func (a *admission) Queued() int   { return len(a.queue) }

// BusyError is ErrBusy with a hint of when to retry.
type BusyError struct{ RetryAfter time.Duration }

func (e *BusyError) Error() string { return ErrBusy.Error() }
func (e *BusyError) Is(target error) bool {
	return target == ErrBusy || errors.Is(ErrBusy, target)
}
