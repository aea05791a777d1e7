// Package measure holds the bench's arithmetic and the machine's state:
// percentiles and medians of samples, a throughput round at a given
// concurrency, the report's machine line, load averages, and waiting for
// an idle machine between systems.
package measure

import (
	"context"
	"sort"
	"sync"
	"time"
)

// PctMs is the p-th percentile (0 < p < 1) of s in milliseconds: the
// sample at index p*len(s) of the sorted samples, the last for p near 1.
// It is 0 for no samples.
func PctMs(s []time.Duration, p float64) float64 {
	if len(s) == 0 {
		return 0
	}
	c := append([]time.Duration(nil), s...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	return float64(c[min(len(c)-1, int(p*float64(len(c))))].Microseconds()) / 1000
}

// Median is the upper median of v (the middle one of an odd count), 0 for
// none.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	return c[len(c)/2]
}

// Round runs f from conc workers for d and returns runs/s. A
// worker stops at its first error; the first error of all is returned.
func Round(ctx context.Context, f func(context.Context) error, conc int, d time.Duration) (float64, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		n     int
		first error
	)
	start := time.Now()
	deadline := start.Add(d)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := f(ctx); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
				mu.Lock()
				n++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds(), first
}

// Sleep waits d, or until ctx ends (its error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
