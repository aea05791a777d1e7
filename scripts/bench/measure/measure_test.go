package measure

import (
	"context"
	"errors"
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

func TestPctMs(t *testing.T) {
	tests := []struct {
		name    string
		samples []time.Duration
		p       float64
		want    float64
	}{
		{"none", nil, 0.5, 0},
		{"one", ms(2.5), 0.5, 2.5},
		{"one p95", ms(2.5), 0.95, 2.5},
		{"odd p50 unsorted", ms(9, 1, 5), 0.5, 5},
		{"even p50 is the upper middle", ms(4, 1, 3, 2), 0.5, 3},
		{"p95 of 20 is the last", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20), 0.95, 20},
		{"p95 of 100 is the 96th", func() []time.Duration {
			var v []float64
			for i := 100; i >= 1; i-- {
				v = append(v, float64(i))
			}
			return ms(v...)
		}(), 0.95, 96},
		{"microsecond resolution", ms(1.2345), 0.5, 1.234},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]time.Duration(nil), tc.samples...)
			if got := PctMs(tc.samples, tc.p); got != tc.want {
				t.Fatalf("PctMs(%v, %v) = %v, want %v", tc.samples, tc.p, got, tc.want)
			}
			if !reflect.DeepEqual(in, tc.samples) {
				t.Fatalf("PctMs reordered its input: %v", tc.samples)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		name string
		v    []float64
		want float64
	}{
		{"none", nil, 0},
		{"one", []float64{7}, 7},
		{"three", []float64{30, 10, 20}, 20},
		{"four is the upper middle", []float64{4, 1, 3, 2}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Median(tc.v); got != tc.want {
				t.Fatalf("Median(%v) = %v, want %v", tc.v, got, tc.want)
			}
		})
	}
}

func TestRound(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		conc    int
		failAt  int64 // the call that fails (0: none)
		wantErr error
	}{
		{"one worker", 1, 0, nil},
		{"four workers", 4, 0, nil},
		{"an error stops the round", 2, 3, boom},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			f := func(context.Context) error {
				n := calls.Add(1)
				if n == tc.failAt {
					return boom
				}
				time.Sleep(time.Millisecond)
				return nil
			}
			// Long enough that a busy machine starts the workers and
			// makes a few calls in it (the error case needs three).
			d := 500 * time.Millisecond
			rate, err := Round(context.Background(), f, tc.conc, d)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Round: error %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				return
			}
			// Every call but those still running at the deadline counts;
			// the rate is over the round's real length, at least d.
			if max := float64(calls.Load()) / d.Seconds(); rate <= 0 || rate > max {
				t.Fatalf("rate %.1f/s, want in (0, %.1f] for %d calls in %v", rate, max, calls.Load(), d)
			}
		})
	}
}
