package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/rootfs"
	"github.com/nsbox/nsbox/scripts/bench/benchd"
	"github.com/nsbox/nsbox/scripts/bench/measure"
)

// benchThroughDaemon measures the daemon's latencies and throughput and
// adds them to rep.
func benchThroughDaemon(ctx context.Context, o Options, rep *report) error {
	socket, store, rfs := o.Socket, o.Store, o.Rootfs
	datasci := ""
	if r, err := (rootfs.Store{Root: store}).Lookup(rootfs.DefaultName); err == nil {
		if _, err := os.Stat(filepath.Join(r.Dir, "usr/lib/python3/dist-packages/pandas")); err == nil {
			datasci = rootfs.DefaultName
		}
	}
	var d, bare *benchd.Daemon
	if socket != "" {
		d = &benchd.Daemon{Client: &client.Client{Socket: socket}}
		rep.Daemon = "the daemon at " + socket
		rfs = "" // its default rootfs
	} else {
		conf := "# nsbox bench\n"
		if datasci != "" {
			conf += fmt.Sprintf("[pools.pandas]\nrootfs = %q\nsize = 1\npreimport = [\"pandas\"]\n", datasci)
		}
		nsbox, err := o.nsbox()
		if err != nil {
			return err
		}
		// No zygote here: these are the pool's and the cold path's figures.
		if d, err = benchd.Start(nsbox, store, rfs, conf, "--zygote=false"); err != nil {
			return err
		}
		defer d.Close()
		rep.Daemon = "a private daemon (this binary), default pool on " + rfs + ", no zygote"
		if o.Only == "zygote" { // the daemon above is the zygote rows' cold one
			if datasci == "" {
				return errors.New("--only zygote: no data-science rootfs \"default\" with pandas (make rootfs-default)")
			}
			if err := d.WaitPools(ctx); err != nil {
				return err
			}
			return benchZygote(ctx, o, rep, d, datasci)
		}
		// And one as the default config has it: a bare zygote on rfs (no
		// pool, so every run forks on request).
		if bare, err = benchd.Start(nsbox, store, rfs, "# nsbox bench: bare zygote\n", "--pool-size", "0"); err != nil {
			return err
		}
		defer bare.Close()
		rep.Daemon += "; bare zygote: a second one with the default [zygote] (a bare zygote on " + rfs + ", no pool)"
	}
	if datasci == "" {
		rep.Skipped = append(rep.Skipped, "pandas through the daemon: no data-science rootfs \"default\" with pandas (make rootfs-default)")
	}
	if err := d.WaitPools(ctx); err != nil {
		return err
	}
	if bare != nil {
		if err := bare.WaitPools(ctx); err != nil { // and its zygote ready
			return err
		}
	}

	cl := d.Client
	sess, err := cl.CreateSession(ctx, &agentapi.SessionRequest{Rootfs: rfs})
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	defer cl.DeleteSession(context.WithoutCancel(ctx), sess.ID)
	if _, err := cl.Exec(ctx, sess.ID, &agentapi.ExecRequest{Code: "x = 0"}); err != nil {
		return fmt.Errorf("session exec: %w", err)
	}

	cases := []daemonCase{
		{name: "print(1), warm (pooled)", target: "<= 3 ms p50", warm: true, cold: "print(1), cold", do: runRequest(cl, rfs, "print(1)", nil)},
		{name: "print(1), cold", do: runRequest(cl, rfs, "print(1)", coldLimits)},
	}
	if bare != nil {
		cases = append(cases, daemonCase{name: "print(1), bare zygote", cold: "print(1), cold", do: runRequest(bare.Client, rfs, "print(1)", coldLimits)})
	}
	cases = append(cases, []daemonCase{
		{name: "session exec x += 1", target: "<= 2 ms p50", do: func(ctx context.Context) (bool, error) {
			res, err := cl.Exec(ctx, sess.ID, &agentapi.ExecRequest{Code: "x += 1"})
			if err == nil && res.Status != agentapi.StatusOK {
				err = fmt.Errorf("status %s: %s", res.Status, res.Error)
			}
			return sess.Pooled, err
		}},
		{name: "session pause + resume (two calls)", target: "<= 10 ms p50 (5 each)", do: func(ctx context.Context) (bool, error) {
			_, err := cl.PauseSession(ctx, sess.ID)
			if err == nil {
				_, err = cl.ResumeSession(ctx, sess.ID)
			}
			return sess.Pooled, err
		}},
	}...)
	if err := addLatency(ctx, &rep.DaemonLatency, d, cases, o.DaemonRuns); err != nil {
		return err
	}
	if datasci != "" {
		pandas := []daemonCase{
			{name: "import pandas, warm (pre-imported)", warm: true, cold: "import pandas, cold", do: runRequest(cl, datasci, "import pandas; print(1)", nil)},
			{name: "import pandas, cold", do: runRequest(cl, datasci, "import pandas; print(1)", coldLimits)},
		}
		if err := addLatency(ctx, &rep.DaemonLatency, d, pandas, o.PandasRuns); err != nil {
			return err
		}
	}

	if datasci != "" && socket == "" {
		if err := benchZygote(ctx, o, rep, d, datasci); err != nil {
			return fmt.Errorf("zygote: %w", err)
		}
	}

	// Throughput: fixed-length rounds, cold and warm in turn. Warm rounds
	// start with full pools; the pool does not refill while every run slot
	// is busy, so at high concurrency most warm runs start cold.
	for _, conc := range o.Concurrency {
		systems := []struct {
			name string
			warm bool
			do   func(context.Context) (bool, error)
		}{
			{"print(1), cold", false, runRequest(cl, rfs, "print(1)", coldLimits)},
			{"print(1), warm", true, runRequest(cl, rfs, "print(1)", nil)},
		}
		if bare != nil {
			systems = append(systems, struct {
				name string
				warm bool
				do   func(context.Context) (bool, error)
			}{"print(1), bare zygote", false, runRequest(bare.Client, rfs, "print(1)", coldLimits)})
		}
		rates := make([][]float64, len(systems))
		counts := make([]pooledCount, len(systems))
		for range o.Rounds {
			for i, s := range systems {
				if s.warm {
					if err := d.WaitPools(ctx); err != nil {
						return err
					}
				}
				n, err := counts[i].round(ctx, s.do, conc, o.Round)
				if err != nil {
					return fmt.Errorf("daemon %s at concurrency %d: %w", s.name, conc, err)
				}
				rates[i] = append(rates[i], n)
			}
		}
		cold := measure.Median(rates[0])
		for i, s := range systems {
			rep.DaemonThroughput = append(rep.DaemonThroughput, daemonRate(s.name, conc, rates[i], &counts[i], cold))
		}
	}
	return nil
}

// addLatency runs the cases in turn, round after round, and appends their
// figures to out.
func addLatency(ctx context.Context, out *[]daemonLatency, d *benchd.Daemon, cases []daemonCase, runs int) error {
	samples := make([][]time.Duration, len(cases))
	pooled := make([]int, len(cases))
	for range runs {
		for i, c := range cases {
			if c.warm {
				pd := d
				if c.pools != nil {
					pd = c.pools
				}
				if err := pd.WaitPools(ctx); err != nil {
					return err
				}
			}
			t0 := time.Now()
			p, err := c.do(ctx)
			if err != nil {
				return fmt.Errorf("daemon %s: %w", c.name, err)
			}
			samples[i] = append(samples[i], time.Since(t0))
			if p {
				pooled[i]++
			}
		}
	}
	*out = append(*out, daemonLatencies(cases, samples, pooled)...)
	return nil
}

// daemonLatencies is one row per case from its samples and the number of
// them that took a warm runner, with p50 over the p50 of the case named
// by its cold field.
func daemonLatencies(cases []daemonCase, samples [][]time.Duration, pooled []int) []daemonLatency {
	out := make([]daemonLatency, len(cases))
	for i, c := range cases {
		n := len(samples[i])
		out[i] = daemonLatency{System: c.name, Runs: n, P50Ms: measure.PctMs(samples[i], 0.5),
			P95Ms: measure.PctMs(samples[i], 0.95), Pooled: float64(pooled[i]) / float64(max(1, n)), Target: c.target}
	}
	for i, c := range cases {
		for j, o := range cases {
			if c.cold != "" && o.name == c.cold && out[j].P50Ms > 0 {
				out[i].VsCold = out[i].P50Ms / out[j].P50Ms
			}
		}
	}
	return out
}

// pooledCount counts a daemon request's runs and those of them that took a
// warm runner.
type pooledCount struct{ pooled, total atomic.Int64 }

// round is a measure.Round of do that counts its runs.
func (c *pooledCount) round(ctx context.Context, do func(context.Context) (bool, error), conc int, d time.Duration) (float64, error) {
	return measure.Round(ctx, func(ctx context.Context) error {
		p, err := do(ctx)
		c.total.Add(1)
		if p {
			c.pooled.Add(1)
		}
		return err
	}, conc, d)
}

// daemonRate is one throughput row: the measure.Median of rates, the fraction of
// the counted runs that were pooled and the ratio to cold (none when cold
// is 0).
func daemonRate(name string, conc int, rates []float64, c *pooledCount, cold float64) daemonThroughput {
	t := daemonThroughput{System: name, Concurrency: conc, RunsPerSec: measure.Median(rates)}
	if n := c.total.Load(); n > 0 {
		t.Pooled = float64(c.pooled.Load()) / float64(n)
	}
	if cold > 0 {
		t.VsCold = t.RunsPerSec / cold
	}
	return t
}
