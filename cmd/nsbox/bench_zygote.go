package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// zygoteCells are the cells issue 10 set targets for, on the data-science
// rootfs.
var zygoteCells = []struct{ name, code, target string }{
	{"import pandas", "import pandas; print(1)", "<= 10 ms p50"},
	{"import pandas, matplotlib.pyplot, scipy, sklearn", "import pandas, matplotlib.pyplot, scipy, sklearn; print(1)", "<= 15 ms p50"},
}

// zygoteConcurrency is the concurrency of the zygote throughput target
// (>= 100 runs/s at 2 on 2 cores).
const zygoteConcurrency = 2

// benchZygote measures the data-science cells cold (on cold, a daemon
// without a zygote) against a second private daemon with a zygote on the
// data-science rootfs: children forked on request, and children forked
// ahead of time by its pool.
func benchZygote(ctx context.Context, rep *benchReport, cold *benchDaemon, store, rfs, datasci string, runs, coldRuns int, round time.Duration, rounds int) error {
	if err := cold.waitPools(ctx); err != nil { // the cold daemon's refills done
		return err
	}
	conf := fmt.Sprintf("# nsbox bench: zygote\n[zygote]\nrootfs = [%q]\n\n[pools.zygote]\nrootfs = %q\nsize = 2\n", datasci, datasci)
	zd, err := startBenchDaemon(store, rfs, conf, "--pool-size", "0")
	if err != nil {
		return err
	}
	defer zd.close()
	if err := zd.waitPools(ctx); err != nil {
		return err
	}
	rep.ZygoteDaemon = "a private daemon with a zygote on " + datasci + " (pool of 2 pre-forked children); cold: the daemon above"
	rep.ZygoteLoad = loadAvg()
	for _, cell := range zygoteCells {
		// Cold runs apart: each is a second of imports whose aftermath
		// (freeing a large process) would land on the next sample.
		coldName := cell.name + ", cold"
		if err := addLatency(ctx, &rep.ZygoteLatency, cold, []daemonCase{
			{name: coldName, do: runRequest(cold.client, datasci, cell.code, coldLimits)},
		}, coldRuns); err != nil {
			return err
		}
		coldLat := rep.ZygoteLatency[len(rep.ZygoteLatency)-1]
		cases := []daemonCase{
			{name: cell.name + ", zygote", target: cell.target, do: runRequest(zd.client, datasci, cell.code, coldLimits)},
			{name: cell.name + ", zygote pre-forked", target: cell.target, warm: true, pools: zd, do: runRequest(zd.client, datasci, cell.code, nil)},
		}
		first := len(rep.ZygoteLatency)
		if err := addLatency(ctx, &rep.ZygoteLatency, zd, cases, runs); err != nil {
			return err
		}
		for i := first; i < len(rep.ZygoteLatency); i++ {
			rep.ZygoteLatency[i].VsCold = rep.ZygoteLatency[i].P50Ms / coldLat.P50Ms
		}
	}
	for _, cell := range zygoteCells {
		systems := []struct {
			name string
			d    *benchDaemon
			lim  bool
			warm bool
		}{
			{cell.name + ", cold", cold, true, false},
			{cell.name + ", zygote", zd, true, false},
			{cell.name + ", zygote pre-forked", zd, false, true},
		}
		var coldRate float64
		for _, s := range systems {
			lim := coldLimits
			if !s.lim {
				lim = nil
			}
			do := runRequest(s.d.client, datasci, cell.code, lim)
			var rates []float64
			var pooled, total atomic.Int64
			for range rounds {
				if s.warm {
					if err := zd.waitPools(ctx); err != nil {
						return err
					}
				}
				n, err := throughputRound(ctx, func(ctx context.Context) error {
					p, err := do(ctx)
					total.Add(1)
					if p {
						pooled.Add(1)
					}
					return err
				}, zygoteConcurrency, round)
				if err != nil {
					return fmt.Errorf("%s: %w", s.name, err)
				}
				rates = append(rates, n)
			}
			t := daemonThroughput{System: s.name, Concurrency: zygoteConcurrency, RunsPerSec: median(rates)}
			if n := total.Load(); n > 0 {
				t.Pooled = float64(pooled.Load()) / float64(n)
			}
			if coldRate == 0 {
				coldRate = t.RunsPerSec
			} else if coldRate > 0 {
				t.VsCold = t.RunsPerSec / coldRate
			}
			rep.ZygoteThroughput = append(rep.ZygoteThroughput, t)
		}
	}
	rep.ZygoteLoad += " -> " + loadAvg()
	return nil
}

// loadAvg is the host's 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func printZygoteBench(rep *benchReport) {
	if len(rep.ZygoteLatency) == 0 {
		return
	}
	fmt.Printf("\nzygote: %s\nload average %s\n\n", rep.ZygoteDaemon, rep.ZygoteLoad)
	tw := newTable()
	fmt.Fprintln(tw, "REQUEST\tRUNS\tP50 ms\tP95 ms\tPOOLED\tP50 vs cold\tTARGET\t")
	for _, l := range rep.ZygoteLatency {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.0f%%\t%s\t%s\t\n", l.System, l.Runs, l.P50Ms, l.P95Ms, 100*l.Pooled, ratio(l.VsCold), l.Target)
	}
	tw.Flush()
	fmt.Println()
	tw = newTable()
	fmt.Fprintln(tw, "THROUGHPUT\tCONCURRENCY\tRUNS/S\tPOOLED\tVS cold\tTARGET\t")
	for _, t := range rep.ZygoteThroughput {
		target := ""
		if strings.HasSuffix(t.System, "zygote") {
			target = ">= 100"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.0f%%\t%s\t%s\t\n", t.System, t.Concurrency, t.RunsPerSec, 100*t.Pooled, ratio(t.VsCold), target)
	}
	tw.Flush()
}
