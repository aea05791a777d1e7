package bench

import (
	"context"
	"reflect"
	"sync/atomic"
	"testing"
	"time"
)

func ms(v ...float64) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x * float64(time.Millisecond))
	}
	return out
}

func TestRatio(t *testing.T) {
	tests := []struct {
		r    float64
		want string
	}{
		{0, "-"},
		{1, "1.00x"},
		{1.554, "1.55x"},
		{0.956, "0.96x"},
		{12.3456, "12.35x"},
	}
	for _, tc := range tests {
		if got := ratio(tc.r); got != tc.want {
			t.Errorf("ratio(%v) = %q, want %q", tc.r, got, tc.want)
		}
	}
}

func TestEngineLatency(t *testing.T) {
	tests := []struct {
		name    string
		names   []string
		samples [][]time.Duration
		want    []latency
	}{
		{
			name:    "against bwrap",
			names:   []string{"nsbox (cold)", "bwrap", "bare python3"},
			samples: [][]time.Duration{ms(6, 3, 4), ms(2, 3, 2), ms(1, 1, 1)},
			want: []latency{
				{System: "nsbox (cold)", Runs: 3, P50Ms: 4, P95Ms: 6, VsBwrap: 2},
				{System: "bwrap", Runs: 3, P50Ms: 2, P95Ms: 3, VsBwrap: 1},
				{System: "bare python3", Runs: 3, P50Ms: 1, P95Ms: 1, VsBwrap: 0.5},
			},
		},
		{
			name:    "no bwrap, no ratios",
			names:   []string{"nsbox (cold)", "bare python3"},
			samples: [][]time.Duration{ms(4), ms(1)},
			want: []latency{
				{System: "nsbox (cold)", Runs: 1, P50Ms: 4, P95Ms: 4},
				{System: "bare python3", Runs: 1, P50Ms: 1, P95Ms: 1},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := engineLatency(tc.names, tc.samples); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("engineLatency:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestEngineThroughput(t *testing.T) {
	tests := []struct {
		name  string
		names []string
		rates [][]float64
		want  []throughput
	}{
		{
			name:  "bare python3 has no rounds",
			names: []string{"nsbox (cold)", "bwrap", "bare python3"},
			rates: [][]float64{{80, 90, 70}, {100, 120, 110}, nil},
			want: []throughput{
				{System: "nsbox (cold)", Concurrency: 2, RunsPerSec: 80, VsBwrap: 80.0 / 110},
				{System: "bwrap", Concurrency: 2, RunsPerSec: 110, VsBwrap: 1},
			},
		},
		{
			name:  "no bwrap, no ratios",
			names: []string{"nsbox (cold)", "runc run"},
			rates: [][]float64{{80}, {40}},
			want: []throughput{
				{System: "nsbox (cold)", Concurrency: 2, RunsPerSec: 80},
				{System: "runc run", Concurrency: 2, RunsPerSec: 40},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := engineThroughput(tc.names, 2, tc.rates); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("engineThroughput:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestDaemonLatencies(t *testing.T) {
	cases := []daemonCase{
		{name: "print(1), warm (pooled)", target: "<= 3 ms p50", cold: "print(1), cold"},
		{name: "print(1), cold"},
		{name: "session exec x += 1", target: "<= 2 ms p50", cold: "no such case"},
	}
	samples := [][]time.Duration{ms(2, 3, 2, 2), ms(8, 8, 9, 7), ms(1, 1, 1, 1)}
	pooled := []int{3, 0, 4}
	want := []daemonLatency{
		{System: "print(1), warm (pooled)", Runs: 4, P50Ms: 2, P95Ms: 3, Pooled: 0.75, VsCold: 0.25, Target: "<= 3 ms p50"},
		{System: "print(1), cold", Runs: 4, P50Ms: 8, P95Ms: 9},
		{System: "session exec x += 1", Runs: 4, P50Ms: 1, P95Ms: 1, Pooled: 1, Target: "<= 2 ms p50"},
	}
	if got := daemonLatencies(cases, samples, pooled); !reflect.DeepEqual(got, want) {
		t.Fatalf("daemonLatencies:\n got %+v\nwant %+v", got, want)
	}
}

func TestDaemonRate(t *testing.T) {
	tests := []struct {
		name          string
		rates         []float64
		pooled, total int64
		cold          float64
		want          daemonThroughput
	}{
		{"cold itself", []float64{50, 40, 60}, 0, 150, 50, daemonThroughput{System: "x", Concurrency: 2, RunsPerSec: 50, VsCold: 1}},
		{"warm, half pooled", []float64{100}, 50, 100, 50, daemonThroughput{System: "x", Concurrency: 2, RunsPerSec: 100, Pooled: 0.5, VsCold: 2}},
		{"no cold rate", []float64{100}, 1, 1, 0, daemonThroughput{System: "x", Concurrency: 2, RunsPerSec: 100, Pooled: 1}},
		{"nothing counted", nil, 0, 0, 10, daemonThroughput{System: "x", Concurrency: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c pooledCount
			c.pooled.Store(tc.pooled)
			c.total.Store(tc.total)
			if got := daemonRate("x", 2, tc.rates, &c, tc.cold); got != tc.want {
				t.Fatalf("daemonRate = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestPooledCountRound(t *testing.T) {
	var c pooledCount
	var calls atomic.Int64
	do := func(context.Context) (bool, error) {
		time.Sleep(time.Millisecond)
		return calls.Add(1)%2 == 0, nil // every other run pooled
	}
	if _, err := c.round(context.Background(), do, 1, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if c.total.Load() != calls.Load() || c.pooled.Load() != calls.Load()/2 {
		t.Fatalf("counted %d of %d pooled, want %d of %d", c.pooled.Load(), c.total.Load(), calls.Load()/2, calls.Load())
	}
}
