package bench

import (
	"github.com/nsbox/nsbox/scripts/bench/measure"
	"time"
)

// engineLatency is the engine part's latency table: one row per system
// from its samples, with p50 over bwrap's p50 when bwrap ran.
func engineLatency(names []string, samples [][]time.Duration) []latency {
	out := make([]latency, len(names))
	var bwrapP50 float64
	for i, name := range names {
		out[i] = latency{System: name, Runs: len(samples[i]), P50Ms: measure.PctMs(samples[i], 0.5), P95Ms: measure.PctMs(samples[i], 0.95)}
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
// concurrency: the measure.Median rate of each system that has rounds (bare
// python3 has none), with the ratio to bwrap's when bwrap ran.
func engineThroughput(names []string, conc int, rates [][]float64) []throughput {
	var out []throughput
	var bw float64
	for i, name := range names {
		if len(rates[i]) == 0 {
			continue
		}
		t := throughput{System: name, Concurrency: conc, RunsPerSec: measure.Median(rates[i])}
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

// compare makes the row of samples s, set beside base's measure.Median (named vs)
// when there is one.
func compare(name string, s []time.Duration, vs string, base []time.Duration, target string) compareRow {
	r := compareRow{System: name, Runs: len(s), P50Ms: measure.PctMs(s, 0.5), P95Ms: measure.PctMs(s, 0.95), Target: target}
	if b := measure.PctMs(base, 0.5); b > 0 {
		r.Vs, r.Ratio = vs, r.P50Ms/b
	}
	return r
}
