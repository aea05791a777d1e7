package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// BatchOptions carry what a transport adds to a batch.
type BatchOptions struct {
	// OnStart is called once the batch is accepted, before its first run.
	OnStart func()
	// OnItem is called (serially) with every run's index and result, or
	// error, as it finishes. Required.
	OnItem func(i int, res *agentapi.RunResult, err error)
	// Stopping, when set, is asked before each run starts: true (the
	// transport is draining) answers that run and the rest ErrShuttingDown
	// instead of starting them, so a drain waits for the runs in flight
	// only, and the caller learns which runs to send elsewhere.
	Stopping func() bool
}

// RunBatch runs a batch's runs, at most its concurrency at once, reports
// each (OnItem) as it finishes, then returns the summary. A batch's runs wait for run slots as long as it
// takes instead of being refused when the queue is full (backpressure, not
// 429s): they are at most max_concurrent at once, so their waiting is
// bounded like the queue's. A run that cannot be run (invalid, or the
// batch cancelled) is an error item; the others go on. The request as a
// whole is refused only when it is malformed.
func (d *Daemon) RunBatch(ctx context.Context, req *agentapi.BatchRequest, opts BatchOptions) (agentapi.BatchSummary, error) {
	sum := agentapi.BatchSummary{Runs: len(req.Runs)}
	if err := d.admit(); err != nil {
		return sum, err
	}
	limit := d.adm.Slots()
	switch {
	case len(req.Runs) == 0:
		return sum, errdefs.Field("runs", "empty: give at least one run")
	case len(req.Runs) > agentapi.MaxBatchRuns:
		return sum, errdefs.Field("runs", "%d runs, the most is %d: split the batch", len(req.Runs), agentapi.MaxBatchRuns)
	case req.Concurrency < 0 || req.Concurrency > limit:
		return sum, errdefs.Field("concurrency", "%d: want 1 to the daemon's max_concurrent (%d), or 0 for that", req.Concurrency, limit)
	}
	n := req.Concurrency
	if n == 0 {
		n = limit
	}
	if opts.OnStart != nil {
		opts.OnStart()
	}
	start := time.Now()
	var mu sync.Mutex // serialises each and the summary
	report := func(i int, res *agentapi.RunResult, err error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			sum.Errors++
		case res.Status == agentapi.StatusOK:
			sum.OK++
		default:
			sum.Failed++
		}
		opts.OnItem(i, res, err)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(n, len(req.Runs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if opts.Stopping != nil && opts.Stopping() {
					report(i, nil, ErrShuttingDown)
					continue
				}
				// Reported from OnResult, while the run's result bytes
				// are still reserved (the result budget).
				_, err := d.Run(ctx, &req.Runs[i], RunOptions{waitForSlot: true, OnResult: func(res *agentapi.RunResult) { report(i, res, nil) }})
				if err != nil {
					report(i, nil, err)
				}
			}
		}()
	}
	for i := range req.Runs {
		next <- i
	}
	close(next)
	wg.Wait()
	sum.WallMs = time.Since(start).Milliseconds()
	return sum, nil
}
