package bench

import (
	"context"
	"sort"
	"sync"
	"time"
)

// pctMs is the p-th percentile (0 < p < 1) of s in milliseconds: the
// sample at index p*len(s) of the sorted samples, the last for p near 1.
// It is 0 for no samples.
func pctMs(s []time.Duration, p float64) float64 {
	if len(s) == 0 {
		return 0
	}
	c := append([]time.Duration(nil), s...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	return float64(c[min(len(c)-1, int(p*float64(len(c))))].Microseconds()) / 1000
}

// median is the upper median of v (the middle one of an odd count), 0 for
// none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	return c[len(c)/2]
}

// engineLatency is the engine part's latency table: one row per system
// from its samples, with p50 over bwrap's p50 when bwrap ran.
func engineLatency(names []string, samples [][]time.Duration) []latency {
	out := make([]latency, len(names))
	var bwrapP50 float64
	for i, name := range names {
		out[i] = latency{System: name, Runs: len(samples[i]), P50Ms: pctMs(samples[i], 0.5), P95Ms: pctMs(samples[i], 0.95)}
		if name == "bwrap" {
			bwrapP50 = out[i].P50Ms
		}
	}
	for i := range out {
		if bwrapP50 > 0 {
			out[i].VsBwrap = out[i].P50Ms / bwrapP50
		}
	}
	return out
}

// engineThroughput is the engine part's throughput rows at one
// concurrency: the median rate of each system that has rounds (bare
// python3 has none), with the ratio to bwrap's when bwrap ran.
func engineThroughput(names []string, conc int, rates [][]float64) []throughput {
	var out []throughput
	var bw float64
	for i, name := range names {
		if len(rates[i]) == 0 {
			continue
		}
		t := throughput{System: name, Concurrency: conc, RunsPerSec: median(rates[i])}
		if name == "bwrap" {
			bw = t.RunsPerSec
		}
		out = append(out, t)
	}
	for i := 0; bw > 0 && i < len(out); i++ {
		out[i].VsBwrap = out[i].RunsPerSec / bw
	}
	return out
}

// throughputRound runs f from conc workers for d and returns runs/s. A
// worker stops at its first error; the first error of all is returned.
func throughputRound(ctx context.Context, f func(context.Context) error, conc int, d time.Duration) (float64, error) {
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

// compareRow is one line of a table that sets each system beside another
// (the node and state parts).
type compareRow struct {
	System string  `json:"system"`
	Runs   int     `json:"runs"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	Vs     string  `json:"vs,omitempty"` // what Ratio compares with
	Ratio  float64 `json:"ratio,omitempty"`
	Target string  `json:"target,omitempty"`
}

// compare makes the row of samples s, set beside base's median (named vs)
// when there is one.
func compare(name string, s []time.Duration, vs string, base []time.Duration, target string) compareRow {
	r := compareRow{System: name, Runs: len(s), P50Ms: pctMs(s, 0.5), P95Ms: pctMs(s, 0.95), Target: target}
	if b := pctMs(base, 0.5); b > 0 {
		r.Vs, r.Ratio = vs, r.P50Ms/b
	}
	return r
}
