package bench

import (
	"context"
	"fmt"
	"github.com/nsbox/nsbox/scripts/bench/benchd"
	"github.com/nsbox/nsbox/scripts/bench/measure"
)

// zygoteCells are the cells issue 10 set targets for, on the data-science
// rootfs.
var zygoteCells = []struct{ name, code, target string }{
	{"import pandas", "import pandas; print(1)", "<= 10 ms p50"},
	{"import pandas, matplotlib.pyplot, scipy, sklearn", "import pandas, matplotlib.pyplot, scipy, sklearn; print(1)", "<= 15 ms p50"},
}

// zygoteConcurrency is the concurrency of the zygote throughput targets
// (a pandas cell >= 150 runs/s at 2 on 2 cores, the whole stack >= 100).
const zygoteConcurrency = 2

// benchZygote measures the data-science cells cold (on cold, a daemon
// without a zygote) against a second private daemon with a zygote on the
// data-science rootfs: children forked on request, and children forked
// ahead of time by its pool.
func benchZygote(ctx context.Context, o Options, rep *report, cold *benchd.Daemon, datasci string) error {
	if err := cold.WaitPools(ctx); err != nil { // the cold daemon's refills done
		return err
	}
	conf := fmt.Sprintf("# nsbox bench: zygote\n[zygote]\nrootfs = [%q]\n\n[pools.zygote]\nrootfs = %q\nsize = 2\n", datasci, datasci)
	nsbox, err := o.nsbox()
	if err != nil {
		return err
	}
	zd, err := benchd.Start(nsbox, o.Store, o.Rootfs, conf, "--pool-size", "0")
	if err != nil {
		return err
	}
	defer zd.Close()
	if err := zd.WaitPools(ctx); err != nil {
		return err
	}
	rep.ZygoteDaemon = "a private daemon with a zygote on " + datasci + " (pool of 2 pre-forked children); cold: the daemon above"
	rep.ZygoteLoad = measure.LoadAvg()
	for _, cell := range zygoteCells {
		// Cold runs apart: each is a second of imports whose aftermath
		// (freeing a large process) would land on the next sample.
		coldName := cell.name + ", cold"
		if err := addLatency(ctx, &rep.ZygoteLatency, cold, []daemonCase{
			{name: coldName, do: runRequest(cold.Client, datasci, cell.code, coldLimits)},
		}, o.PandasRuns); err != nil {
			return err
		}
		coldLat := rep.ZygoteLatency[len(rep.ZygoteLatency)-1]
		cases := []daemonCase{
			{name: cell.name + ", zygote", target: cell.target, do: runRequest(zd.Client, datasci, cell.code, coldLimits)},
			{name: cell.name + ", zygote pre-forked", target: cell.target, warm: true, pools: zd, do: runRequest(zd.Client, datasci, cell.code, nil)},
		}
		first := len(rep.ZygoteLatency)
		for _, d := range []*benchd.Daemon{cold, zd} { // the cold row's teardown is not the zygote's
			if err := d.Idle(ctx); err != nil {
				return err
			}
		}
		if err := addLatency(ctx, &rep.ZygoteLatency, zd, cases, o.DaemonRuns); err != nil {
			return err
		}
		for i := first; i < len(rep.ZygoteLatency); i++ {
			rep.ZygoteLatency[i].VsCold = rep.ZygoteLatency[i].P50Ms / coldLat.P50Ms
		}
	}
	for _, cell := range zygoteCells {
		systems := []struct {
			name string
			d    *benchd.Daemon
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
			do := runRequest(s.d.Client, datasci, cell.code, lim)
			// Both daemons idle first: the last system's teardown (a cold
			// run frees a whole interpreter with its imports) is not this
			// one's.
			for _, d := range []*benchd.Daemon{cold, zd} {
				if err := d.Idle(ctx); err != nil {
					return err
				}
			}
			var rates []float64
			var count pooledCount
			for range o.Rounds {
				if s.warm {
					if err := zd.WaitPools(ctx); err != nil {
						return err
					}
				}
				n, err := count.round(ctx, do, zygoteConcurrency, o.Round)
				if err != nil {
					return fmt.Errorf("%s: %w", s.name, err)
				}
				rates = append(rates, n)
			}
			// The first system is cold: no ratio to itself.
			t := daemonRate(s.name, zygoteConcurrency, rates, &count, coldRate)
			if coldRate == 0 {
				coldRate = t.RunsPerSec
			}
			rep.ZygoteThroughput = append(rep.ZygoteThroughput, t)
		}
	}
	rep.ZygoteLoad += " -> " + measure.LoadAvg()
	return nil
}
