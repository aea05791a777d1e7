// Package admission bounds how many runs the daemon executes at once: a
// Gate of run slots with a queue of places to wait for one. A request
// that finds both full is refused at once (ErrBusy, as a BusyError with a
// retry hint from how long slots are held); nothing grows without bound.
// The core takes a slot for each run and gives it back when the run's
// answer is out; the metrics read InFlight and Queued. At a drain the
// Gate stops giving slots: the runs waiting for one, and every later
// request, get ErrShuttingDown.
package admission

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nsbox/nsbox/container/clock"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

var (
	// ErrBusy: every run slot and queue place is taken.
	ErrBusy = errdefs.New(errdefs.ErrExhausted, "too many runs in flight and queued; retry later or raise --max-concurrent/--queue")
	// ErrShuttingDown: the daemon is draining and starts no more runs.
	ErrShuttingDown = errdefs.New(errdefs.ErrUnavailable, "the nsbox daemon is shutting down; retry against the next instance")
)

// BusyError is ErrBusy with a hint of when to retry.
type BusyError struct{ RetryAfter time.Duration }

func (e *BusyError) Error() string { return ErrBusy.Error() }
func (e *BusyError) Is(target error) bool {
	return target == ErrBusy || errors.Is(ErrBusy, target)
}

// Gate is slots run slots and a queue of places to wait for one.
type Gate struct {
	slots    chan struct{}
	queue    chan struct{}
	draining chan struct{} // closed by Drain
	drain    sync.Once
	clock    clock.Clock
	epoch    time.Time // holders' start times are kept from here

	mu sync.Mutex
	// held is the mean time a slot is held: the plain mean of the first
	// learnRuns holdings, then a moving average over about as many, so
	// that a fresh daemon's first estimate is not pulled towards 0.
	held    time.Duration
	learned int
	// holders hold a slot now; startSum is the sum of their start times
	// (since epoch): before any slot came back, how long they have held
	// theirs is the best estimate there is.
	holders  int
	startSum time.Duration
}

// learnRuns is how many holdings the mean of held weighs.
const learnRuns = 8

// New returns a Gate of slots run slots and queue waiting places, timed
// by clk (nil: the real clock).
func New(slots, queue int, clk clock.Clock) *Gate {
	clk = clock.Or(clk)
	return &Gate{slots: make(chan struct{}, slots), queue: make(chan struct{}, queue),
		draining: make(chan struct{}), clock: clk, epoch: clk.Now()}
}

// Acquire takes a run slot, waiting in the queue if there is room there.
// The returned func gives the slot back.
func (a *Gate) Acquire(ctx context.Context) (release func(), err error) {
	if a.Draining() {
		return nil, ErrShuttingDown
	}
	select {
	case a.slots <- struct{}{}:
		return a.admitted()
	default:
	}
	select {
	case a.queue <- struct{}{}:
	default:
		return nil, &BusyError{RetryAfter: a.retryAfter()}
	}
	defer func() { <-a.queue }()
	return a.wait(ctx)
}

// AcquireWaiting takes a run slot, waiting for one however full the queue
// is; its callers bound their own number (RunBatch's workers).
func (a *Gate) AcquireWaiting(ctx context.Context) (release func(), err error) {
	if a.Draining() {
		return nil, ErrShuttingDown
	}
	return a.wait(ctx)
}

// wait waits for a slot until ctx ends or the Gate drains.
func (a *Gate) wait(ctx context.Context) (release func(), err error) {
	select {
	case a.slots <- struct{}{}:
		return a.admitted()
	case <-a.draining:
		return nil, ErrShuttingDown
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a run slot: %w", context.Cause(ctx))
	}
}

// admitted keeps a slot just taken, unless Drain has begun meanwhile
// (a select between a free slot and the drain picks either): then it
// gives the slot back, so that no run starts after Drain.
func (a *Gate) admitted() (release func(), err error) {
	if a.Draining() {
		<-a.slots
		return nil, ErrShuttingDown
	}
	return a.releaser(), nil
}

// Drain stops giving slots: every run waiting in the queue, and every
// Acquire from now on, gets ErrShuttingDown; the slots held stay held
// until their release. Drain may be called more than once.
func (a *Gate) Drain() { a.drain.Do(func() { close(a.draining) }) }

// Stopping is closed when Drain is called.
func (a *Gate) Stopping() <-chan struct{} { return a.draining }

// Draining reports whether Drain has been called.
func (a *Gate) Draining() bool {
	select {
	case <-a.draining:
		return true
	default:
		return false
	}
}

// releaser counts the holder in, and returns the func that gives the
// slot back once and learns how long it was held.
func (a *Gate) releaser() func() {
	start := a.clock.Now().Sub(a.epoch)
	a.mu.Lock()
	a.holders++
	a.startSum += start
	a.mu.Unlock()
	return sync.OnceFunc(func() {
		d := a.clock.Now().Sub(a.epoch) - start
		a.mu.Lock()
		a.holders--
		a.startSum -= start
		a.learned = min(a.learned+1, learnRuns)
		a.held += (d - a.held) / time.Duration(a.learned)
		a.mu.Unlock()
		<-a.slots
	})
}

// retryAfter estimates when a place frees up: everything queued, plus
// the one asking, drains through the slots at the mean holding time
// (before any slot came back, the mean time the holders have held theirs
// so far). A client told this waits its turn instead of hammering.
func (a *Gate) retryAfter() time.Duration {
	a.mu.Lock()
	held := a.held
	if a.learned == 0 && a.holders > 0 {
		held = a.clock.Now().Sub(a.epoch) - a.startSum/time.Duration(a.holders)
	}
	a.mu.Unlock()
	d := held * time.Duration(len(a.queue)+1) / time.Duration(cap(a.slots))
	return min(max(d, time.Second), time.Minute).Round(time.Second)
}

// Slots is how many runs may hold a slot at once.
func (a *Gate) Slots() int { return cap(a.slots) }

// InFlight is how many runs hold a slot; Queued how many wait for one.
func (a *Gate) InFlight() int { return len(a.slots) }
func (a *Gate) Queued() int   { return len(a.queue) }
