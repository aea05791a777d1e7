// Package llcost is the bench's "landlock" section: what Landlock costs
// on the daemon's spawn paths, beside the same daemon without it in the
// same run. Two private daemons alike but for [security] landlock
// ("auto" against "off") answer a print(1) in turn, the one that goes
// first swapped every round (the first of a pair follows the other's
// teardown and is a little slower for it), for each way a run starts:
// cold (the engine, no zygote), forked on request from the zygote, and
// pre-forked (a pool the zygote refills). The ratio's spread over blocks
// of the run is the machine's noise, measured in the same run.
package llcost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/scripts/bench/benchd"
	"github.com/nsbox/nsbox/scripts/bench/measure"
)

// Options are the daemons' binary and rootfs and the rounds per path.
type Options struct {
	Nsbox  string // the nsbox binary started as the daemons
	Store  string // the rootfs store
	Rootfs string // the rootfs of every run (needs python3)
	Runs   int    // rounds per path, each one run with and one without
	// NoSettle skips the wait, up to 30 s before each path, for a mostly
	// idle CPU: for a run that only checks the section works (its figures
	// then carry the machine's load).
	NoSettle bool
}

// Blocks is how many consecutive blocks of rounds the noise is read
// from: each block's ratio of medians, the lowest and highest shown.
const Blocks = 5

// Row is one spawn path's figures, with Landlock on and off.
type Row struct {
	Path   string  `json:"path"`
	Runs   int     `json:"runs"`
	OnP50  float64 `json:"on_p50_ms"`
	OnP95  float64 `json:"on_p95_ms"`
	OffP50 float64 `json:"off_p50_ms"`
	OffP95 float64 `json:"off_p95_ms"`
	Ratio  float64 `json:"ratio"`     // OnP50 / OffP50
	Low    float64 `json:"ratio_low"` // the lowest and highest block's ratio: the noise
	High   float64 `json:"ratio_high"`
}

// cold differs from the pools' limits (pids) so that a run is not taken
// from a pool: the engine on a daemon without a zygote, a fork on
// request on one with it.
var cold = &agentapi.Limits{Pids: 65}

// pair is one path's two daemons and whether a sample waits for full pools.
type pair struct {
	path    string
	on, off *benchd.Daemon
	lim     *agentapi.Limits
	warm    bool
}

// Run starts four private daemons (cold and zygote, each with and
// without Landlock) and measures o.Runs rounds of each path; load is the
// load averages before and after.
func Run(ctx context.Context, o Options) (rows []Row, load string, err error) {
	if o.Runs < Blocks {
		return nil, "", fmt.Errorf("landlock: --runs %d: give at least %d (the noise is read from %d blocks)", o.Runs, Blocks, Blocks)
	}
	start := func(mode string, zygote bool) (*benchd.Daemon, error) {
		conf := fmt.Sprintf("# nsbox bench: landlock\n[security]\nlandlock = %q\n", mode)
		if !zygote {
			return benchd.Start(o.Nsbox, o.Store, o.Rootfs, conf, "--pool-size", "0", "--zygote=false")
		}
		conf += fmt.Sprintf("\n[zygote]\nrootfs = [%q]\n\n[pools.zygote]\nrootfs = %q\nsize = 2\n", o.Rootfs, o.Rootfs)
		return benchd.Start(o.Nsbox, o.Store, o.Rootfs, conf, "--pool-size", "0")
	}
	var ds []*benchd.Daemon
	defer func() {
		for _, d := range ds {
			d.Close()
		}
	}()
	for _, c := range []struct {
		mode   string
		zygote bool
	}{{"auto", false}, {"off", false}, {"auto", true}, {"off", true}} {
		d, err := start(c.mode, c.zygote)
		if err != nil {
			return nil, "", err
		}
		d.NoSettle = o.NoSettle
		ds = append(ds, d)
	}
	for _, d := range ds {
		if err := d.WaitPools(ctx); err != nil {
			return nil, "", err
		}
	}
	// Each daemon says it runs as asked: Landlock active with "auto"
	// (a kernel without it has nothing to compare), inactive with "off".
	for i, d := range ds {
		info, err := d.Client.Info(ctx)
		if err != nil {
			return nil, "", err
		}
		if want := i%2 == 0; info.Landlock.Active != want {
			if want {
				return nil, "", errors.New("landlock: this kernel has no Landlock (nsbox doctor): nothing to compare")
			}
			return nil, "", fmt.Errorf("landlock: the daemon with landlock = \"off\" reports it active: %+v", info.Landlock)
		}
	}
	before := measure.LoadAvg()
	for _, p := range []pair{
		{path: "cold (the engine)", on: ds[0], off: ds[1], lim: cold},
		{path: "zygote, forked on request", on: ds[2], off: ds[3], lim: cold},
		{path: "zygote, pre-forked", on: ds[2], off: ds[3], warm: true},
	} {
		// The pair idle first (the last path's teardown is not this
		// one's); Idle also waits, up to 30 s, for a mostly idle CPU
		// (not with o.NoSettle).
		for _, d := range []*benchd.Daemon{p.on, p.off} {
			if err := d.Idle(ctx); err != nil {
				return nil, "", err
			}
		}
		row, err := measurePair(ctx, o, p)
		if err != nil {
			return nil, "", fmt.Errorf("landlock: %s: %w", p.path, err)
		}
		rows = append(rows, row)
	}
	return rows, before + " -> " + measure.LoadAvg(), nil
}

// measurePair runs p's rounds: each a print(1) through one daemon and
// then the other, which first alternating.
func measurePair(ctx context.Context, o Options, p pair) (Row, error) {
	var on, off []time.Duration
	one := func(d *benchd.Daemon, into *[]time.Duration) error {
		if p.warm {
			if err := d.WaitPools(ctx); err != nil {
				return err
			}
		}
		t0 := time.Now()
		res, err := d.Client.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: "print(1)", Rootfs: o.Rootfs, Limits: p.lim})
		if err != nil {
			return err
		}
		el := time.Since(t0)
		if res.Status != agentapi.StatusOK {
			return fmt.Errorf("status %s: %s%s", res.Status, res.Error, res.Stderr)
		}
		if p.warm != res.Pooled {
			return fmt.Errorf("pooled %v, want %v (the daemon did not take the path measured)", res.Pooled, p.warm)
		}
		*into = append(*into, el)
		return nil
	}
	for r := range o.Runs {
		first, second := func() error { return one(p.on, &on) }, func() error { return one(p.off, &off) }
		if r%2 == 1 {
			first, second = second, first
		}
		if err := first(); err != nil {
			return Row{}, err
		}
		if err := second(); err != nil {
			return Row{}, err
		}
	}
	row := Row{Path: p.path, Runs: o.Runs,
		OnP50: measure.PctMs(on, 0.5), OnP95: measure.PctMs(on, 0.95),
		OffP50: measure.PctMs(off, 0.5), OffP95: measure.PctMs(off, 0.95)}
	row.Ratio = row.OnP50 / row.OffP50
	row.Low, row.High = spread(on, off)
	return row, nil
}

// spread is the lowest and highest ratio of medians over Blocks
// consecutive blocks of the rounds (both slices are as long, in round
// order).
func spread(on, off []time.Duration) (low, high float64) {
	n := len(on) / Blocks
	for b := range Blocks {
		end := (b + 1) * n
		if b == Blocks-1 {
			end = len(on)
		}
		r := measure.PctMs(on[b*n:end], 0.5) / measure.PctMs(off[b*n:end], 0.5)
		if b == 0 || r < low {
			low = r
		}
		if b == 0 || r > high {
			high = r
		}
	}
	return low, high
}

// Print writes rows as a table (w is a tabwriter).
func Print(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "LANDLOCK\tRUNS\tON P50\tON P95\tOFF P50\tOFF P95\tON/OFF\tNOISE (BLOCKS)\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%d\t%.2f ms\t%.2f ms\t%.2f ms\t%.2f ms\t%.3f\t%.3f-%.3f\t\n", r.Path, r.Runs,
			r.OnP50, r.OnP95, r.OffP50, r.OffP95, r.Ratio, r.Low, r.High)
	}
}
