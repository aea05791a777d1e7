package admission

import (
	"context"
	"fmt"
	"sync"
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
// closed (ErrShuttingDown).
func (r *Results) Acquire(ctx context.Context, n int64, stop <-chan struct{}) (*Reservation, error) {
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
	return &Reservation{r: r, n: n}, nil
}

// Reservation is bytes held from a Results budget.
type Reservation struct {
	r  *Results
	mu sync.Mutex
	n  int64
}

// Shrink gives back what the reservation holds beyond n (a run's outputs
// once their size is known), so that an answer waiting to be taken holds
// its own size, not its caps.
func (v *Reservation) Shrink(n int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if n < 0 || n >= v.n {
		return
	}
	v.r.used.Add(n - v.n)
	v.r.sem.Release(v.n - n)
	v.n = n
}

// Release gives everything back; a second call does nothing.
func (v *Reservation) Release() { v.Shrink(0) }
