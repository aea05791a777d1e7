package admission

import (
	"context"
	"fmt"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// Results is the budget of run results held at once: a run reserves its
// outputs' caps (twice output_bytes) before it starts and gives them back
// once its answer is written, so that what the daemon holds of results
// between a run's end and its answer is bounded however many clients
// ask for big outputs. Four clients of 2 × 64 MiB answers took 1.29 GiB
// of RSS with nothing counting them. Waiters are served in order, so
// that a big reservation is not starved by a stream of small ones.
type Results struct {
	sem  *semaphore.Weighted
	max  int64
	used atomic.Int64
}

// NewResults returns a budget of max bytes of results.
func NewResults(max int64) *Results {
	return &Results{sem: semaphore.NewWeighted(max), max: max}
}

// Max is the budget's size.
func (r *Results) Max() int64 { return r.max }

// InUse is the bytes reserved now.
func (r *Results) InUse() int64 { return r.used.Load() }

// Acquire reserves n bytes (at most the whole budget: a run whose caps
// pass it runs alone), waiting until they are free, ctx ends, or stop is
// closed (ErrShuttingDown). release gives them back; a second call does
// nothing.
func (r *Results) Acquire(ctx context.Context, n int64, stop <-chan struct{}) (release func(), err error) {
	n = min(max(n, 0), r.max)
	if !r.sem.TryAcquire(n) {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-stop:
				cancel()
			case <-wctx.Done():
			}
		}()
		if err := r.sem.Acquire(wctx, n); err != nil {
			select {
			case <-stop:
				return nil, ErrShuttingDown
			default:
			}
			return nil, fmt.Errorf("waiting for room for the run's output (the daemon's %d MiB result budget): %w", r.max>>20, context.Cause(ctx))
		}
	}
	r.used.Add(n)
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) {
			r.used.Add(-n)
			r.sem.Release(n)
		}
	}, nil
}
