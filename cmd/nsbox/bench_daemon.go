package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/rootfs"
)

// daemonLatency is one request kind's figures through the daemon.
type daemonLatency struct {
	System string  `json:"system"`
	Runs   int     `json:"runs"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	// Pooled is the fraction of the runs that took a warm runner.
	Pooled float64 `json:"pooled"`
	// VsCold is p50 over the cold p50 of the same code.
	VsCold float64 `json:"vs_cold_p50,omitempty"`
	Target string  `json:"target,omitempty"`
}

type daemonThroughput struct {
	System      string  `json:"system"`
	Concurrency int     `json:"concurrency"`
	RunsPerSec  float64 `json:"runs_per_sec"`
	Pooled      float64 `json:"pooled"` // fraction of runs that took a warm runner
	VsCold      float64 `json:"vs_cold,omitempty"`
}

// benchDaemon is the daemon the bench talks to: a private one it started,
// or one at --socket.
type benchDaemon struct {
	client *client.Client
	cmd    *exec.Cmd
	dir    string
	log    *os.File
}

// startBenchDaemon starts `nsbox daemon` (this binary) on temp paths with
// its own cgroup name, the config file conf and extra flags.
func startBenchDaemon(store, rfs, conf string, extra ...string) (*benchDaemon, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "nsbox-bench-daemon-")
	if err != nil {
		return nil, err
	}
	d := &benchDaemon{dir: dir, client: &client.Client{Socket: filepath.Join(dir, "s.sock")}}
	if err := os.WriteFile(filepath.Join(dir, "nsbox.conf"), []byte(conf), 0o600); err != nil {
		d.close()
		return nil, err
	}
	if d.log, err = os.Create(filepath.Join(dir, "daemon.log")); err != nil {
		d.close()
		return nil, err
	}
	d.cmd = exec.Command(self, "daemon", "--config", filepath.Join(dir, "nsbox.conf"), "--socket", d.client.Socket,
		"--state-dir", filepath.Join(dir, "state"), "--run-dir", filepath.Join(dir, "run"), "--rootfs-store", store,
		"--default-rootfs", rfs, "--queue", "64", "--cgroup-name", "nsbox-bench-"+container.NewID()[:8], "--log-level", "warn")
	d.cmd.Args = append(d.cmd.Args, extra...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := d.cmd.Start(); err != nil {
		d.close()
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := d.client.Health(ctx)
		cancel()
		if err == nil {
			return d, nil
		}
		if time.Now().After(deadline) {
			d.close()
			return nil, fmt.Errorf("the bench daemon did not answer: %v (log in %s)", err, d.log.Name())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *benchDaemon) close() {
	if d.cmd != nil && d.cmd.Process != nil {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		_ = d.cmd.Wait()
	}
	if d.log != nil {
		d.log.Close()
	}
	if d.dir != "" {
		os.RemoveAll(d.dir)
	}
}

// poolSettle is the pause after the pools are full before a warm sample.
const poolSettle = 250 * time.Millisecond

// waitPools polls /v1/info until every pool is full, so that a warm
// sample really finds a runner (the wait is not measured).
func (d *benchDaemon) waitPools(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		info, err := d.client.Info(ctx)
		if err != nil {
			return err
		}
		full := true
		for _, p := range info.Pools {
			if p.Ready < p.Size {
				full = false
			}
		}
		for _, z := range info.Zygotes {
			if z.State != "ready" && z.State != "unused" {
				full = false
			}
		}
		if full {
			// Let the refill's tail (its sandbox's last set-up work, the
			// previous run's teardown) pass, as it has in a pool that sat
			// idle for a moment, which is the case the pool is for.
			time.Sleep(poolSettle)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pools not full (or zygotes not ready) after 2m: %+v %+v", info.Pools, info.Zygotes)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// daemonCase is one kind of request.
type daemonCase struct {
	name   string
	target string
	warm   bool         // wait for full pools before each sample
	pools  *benchDaemon // whose pools (nil: the bench daemon's)
	runs   int          // fewer rounds than the others (0: all)
	cold   string
	do     func(ctx context.Context) (pooled bool, err error)
}

func runRequest(cl *client.Client, rootfsName, code string, lim *agentapi.Limits) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		res, err := cl.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: code, Rootfs: rootfsName, Limits: lim})
		var ae *agentapi.Error
		for errors.As(err, &ae) && ae.Status == http.StatusTooManyRequests { // a --socket daemon with a short queue
			time.Sleep(time.Millisecond)
			res, err = cl.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: code, Rootfs: rootfsName, Limits: lim})
		}
		if err != nil {
			return false, err
		}
		if res.Status != agentapi.StatusOK {
			return false, fmt.Errorf("status %s: %s%s", res.Status, res.Error, res.Stderr)
		}
		return res.Pooled, nil
	}
}

// coldLimits differ from the default pool's (pids) so that a run starts
// cold at the same cost.
var coldLimits = &agentapi.Limits{Pids: 65}

// benchThroughDaemon measures the daemon's latencies and throughput and
// adds them to rep.
func benchThroughDaemon(ctx context.Context, rep *benchReport, socket, store, rfs string, runs, pandasRuns int, concs []int, round time.Duration, rounds int) error {
	datasci := ""
	if r, err := (rootfs.Store{Root: store}).Lookup(rootfs.DefaultName); err == nil {
		if _, err := os.Stat(filepath.Join(r.Dir, "usr/lib/python3/dist-packages/pandas")); err == nil {
			datasci = rootfs.DefaultName
		}
	}
	var d *benchDaemon
	if socket != "" {
		d = &benchDaemon{client: &client.Client{Socket: socket}}
		rep.Daemon = "the daemon at " + socket
		rfs = "" // its default rootfs
	} else {
		conf := "# nsbox bench\n"
		if datasci != "" {
			conf += fmt.Sprintf("[pools.pandas]\nrootfs = %q\nsize = 1\npreimport = [\"pandas\"]\n", datasci)
		}
		var err error
		// No zygote here: these are the pool's and the cold path's figures.
		if d, err = startBenchDaemon(store, rfs, conf, "--zygote=false"); err != nil {
			return err
		}
		defer d.close()
		rep.Daemon = "a private daemon (this binary), default pool on " + rfs + ", no zygote"
	}
	if datasci == "" {
		rep.Skipped = append(rep.Skipped, "pandas through the daemon: no data-science rootfs \"default\" with pandas (make rootfs-default)")
	}
	if err := d.waitPools(ctx); err != nil {
		return err
	}

	cl := d.client
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
		{name: "session exec x += 1", target: "<= 2 ms p50", do: func(ctx context.Context) (bool, error) {
			res, err := cl.Exec(ctx, sess.ID, &agentapi.ExecRequest{Code: "x += 1"})
			if err == nil && res.Status != agentapi.StatusOK {
				err = fmt.Errorf("status %s: %s", res.Status, res.Error)
			}
			return sess.Pooled, err
		}},
	}
	if err := rep.addDaemonLatency(ctx, d, cases, runs); err != nil {
		return err
	}
	if datasci != "" {
		pandas := []daemonCase{
			{name: "import pandas, warm (pre-imported)", warm: true, cold: "import pandas, cold", do: runRequest(cl, datasci, "import pandas; print(1)", nil)},
			{name: "import pandas, cold", do: runRequest(cl, datasci, "import pandas; print(1)", coldLimits)},
		}
		if err := rep.addDaemonLatency(ctx, d, pandas, pandasRuns); err != nil {
			return err
		}
	}

	if datasci != "" && socket == "" {
		if err := benchZygote(ctx, rep, d, store, rfs, datasci, runs, pandasRuns, round, rounds); err != nil {
			return fmt.Errorf("zygote: %w", err)
		}
	}

	// Throughput: fixed-length rounds, cold and warm in turn. Warm rounds
	// start with full pools; the pool does not refill while every run slot
	// is busy, so at high concurrency most warm runs start cold.
	for _, conc := range concs {
		systems := []struct {
			name string
			warm bool
			do   func(context.Context) (bool, error)
		}{
			{"print(1), cold", false, runRequest(cl, rfs, "print(1)", coldLimits)},
			{"print(1), warm", true, runRequest(cl, rfs, "print(1)", nil)},
		}
		rates := make([][]float64, len(systems))
		var pooled, total [2]atomic.Int64
		for range rounds {
			for i, s := range systems {
				if s.warm {
					if err := d.waitPools(ctx); err != nil {
						return err
					}
				}
				n, err := throughputRound(ctx, func(ctx context.Context) error {
					p, err := s.do(ctx)
					total[i].Add(1)
					if p {
						pooled[i].Add(1)
					}
					return err
				}, conc, round)
				if err != nil {
					return fmt.Errorf("daemon %s at concurrency %d: %w", s.name, conc, err)
				}
				rates[i] = append(rates[i], n)
			}
		}
		cold := median(rates[0])
		for i, s := range systems {
			t := daemonThroughput{System: s.name, Concurrency: conc, RunsPerSec: median(rates[i])}
			if n := total[i].Load(); n > 0 {
				t.Pooled = float64(pooled[i].Load()) / float64(n)
			}
			if cold > 0 {
				t.VsCold = t.RunsPerSec / cold
			}
			rep.DaemonThroughput = append(rep.DaemonThroughput, t)
		}
	}
	return nil
}

// addDaemonLatency runs the cases in turn, round after round.
func (rep *benchReport) addDaemonLatency(ctx context.Context, d *benchDaemon, cases []daemonCase, runs int) error {
	return addLatency(ctx, &rep.DaemonLatency, d, cases, runs)
}

// addLatency runs the cases in turn, round after round, and appends their
// figures to out.
func addLatency(ctx context.Context, out *[]daemonLatency, d *benchDaemon, cases []daemonCase, runs int) error {
	samples := make([][]time.Duration, len(cases))
	pooled := make([]int, len(cases))
	for round := range runs {
		for i, c := range cases {
			if c.runs > 0 && round >= c.runs {
				continue
			}
			if c.warm {
				pd := d
				if c.pools != nil {
					pd = c.pools
				}
				if err := pd.waitPools(ctx); err != nil {
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
	first := len(*out)
	for i, c := range cases {
		n := len(samples[i])
		*out = append(*out, daemonLatency{System: c.name, Runs: n, P50Ms: pctMs(samples[i], 0.5),
			P95Ms: pctMs(samples[i], 0.95), Pooled: float64(pooled[i]) / float64(max(1, n)), Target: c.target})
	}
	for i, c := range cases {
		for j, o := range cases {
			if c.cold != "" && o.name == c.cold && (*out)[first+j].P50Ms > 0 {
				(*out)[first+i].VsCold = (*out)[first+i].P50Ms / (*out)[first+j].P50Ms
			}
		}
	}
	return nil
}

func printDaemonBench(rep *benchReport) {
	if len(rep.DaemonLatency) == 0 {
		return
	}
	fmt.Printf("\nthrough %s, over the Unix socket (alternating)\n\n", rep.Daemon)
	tw := newTable()
	fmt.Fprintln(tw, "REQUEST\tRUNS\tP50 ms\tP95 ms\tPOOLED\tP50 vs cold\tTARGET\t")
	for _, l := range rep.DaemonLatency {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.0f%%\t%s\t%s\t\n", l.System, l.Runs, l.P50Ms, l.P95Ms, 100*l.Pooled, ratio(l.VsCold), l.Target)
	}
	tw.Flush()
	fmt.Println()
	tw = newTable()
	fmt.Fprintln(tw, "THROUGHPUT\tCONCURRENCY\tRUNS/S\tPOOLED\tVS cold\t")
	for _, t := range rep.DaemonThroughput {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.0f%%\t%s\t\n", t.System, t.Concurrency, t.RunsPerSec, 100*t.Pooled, ratio(t.VsCold))
	}
	tw.Flush()
}

func newTable() *tabwriter.Writer {
	return tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
}
