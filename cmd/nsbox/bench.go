package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/rootfs"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "measure start-up and throughput against bubblewrap, runc and bare python3",
		Description: `Runs python3 -c 'print(1)' on the same rootfs in every system, alternating
between them round by round so that machine drift hits all of them alike,
and prints medians, p95s and ratios to bubblewrap. Throughput is runs/s at
the given concurrencies, again alternating. Baselines that are not
installed are skipped with a note (apt-get install bubblewrap runc).

Then, through the daemon over its Unix socket (a private daemon of this
binary on temp paths, or --socket): warm (pooled) and cold print(1),
import pandas pre-imported in the pool and cold (on the data-science rootfs
"default", skipped when it is missing), a session exec round trip, and
runs/s at each concurrency, cold and warm in turn.

Then the zygote (private daemons only, on "default"): import pandas, and
import pandas, matplotlib.pyplot, scipy, sklearn, each cold, forked from
the zygote on request, and pre-forked (a pool refilled from the zygote):
p50/p95 and runs/s at concurrency 2. README "Benchmarks" says how to read
the tables.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "rootfs", Value: "minimal", Usage: "rootfs `NAME` for the cold runs"},
			&cli.StringFlag{Name: "store", Value: rootfs.DefaultStoreRoot, EnvVars: []string{"NSBOX_ROOTFS_STORE"}, Usage: "rootfs store `DIR`"},
			&cli.IntFlag{Name: "runs", Value: 100, Usage: "rounds of the latency comparison"},
			&cli.DurationFlag{Name: "round", Value: time.Second, Usage: "length of one throughput round"},
			&cli.IntFlag{Name: "rounds", Value: 3, Usage: "throughput rounds per system and concurrency"},
			&cli.IntSliceFlag{Name: "concurrency", Value: cli.NewIntSlice(1, 2, 8), Usage: "concurrencies for throughput"},
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
			&cli.StringFlag{Name: "socket", Usage: "measure the daemon at this `SOCKET` instead of starting a private one"},
			&cli.IntFlag{Name: "daemon-runs", Value: 100, Usage: "rounds of the latency comparison through the daemon"},
			&cli.IntFlag{Name: "pandas-runs", Value: 10, Usage: "rounds of the import pandas comparison through the daemon"},
			&cli.StringFlag{Name: "only", Usage: "run only the `engine` or the `daemon` part"},
		},
		Action: runBench,
	}
}

// benchSystem is one way of running a command.
type benchSystem struct {
	Name string `json:"name"`
	Note string `json:"note,omitempty"`
	run  func(ctx context.Context) error
}

// latency is one system's figures.
type latency struct {
	System  string  `json:"system"`
	Runs    int     `json:"runs"`
	P50Ms   float64 `json:"p50_ms"`
	P95Ms   float64 `json:"p95_ms"`
	VsBwrap float64 `json:"vs_bwrap_p50,omitempty"`
}

type throughput struct {
	System      string  `json:"system"`
	Concurrency int     `json:"concurrency"`
	RunsPerSec  float64 `json:"runs_per_sec"`
	VsBwrap     float64 `json:"vs_bwrap,omitempty"`
}

type benchReport struct {
	Machine    string       `json:"machine"`
	Command    string       `json:"command"`
	Latency    []latency    `json:"latency"`
	Throughput []throughput `json:"throughput"`

	Daemon           string             `json:"daemon,omitempty"`
	DaemonLatency    []daemonLatency    `json:"daemon_latency,omitempty"`
	DaemonThroughput []daemonThroughput `json:"daemon_throughput,omitempty"`

	ZygoteDaemon     string             `json:"zygote_daemon,omitempty"`
	ZygoteLoad       string             `json:"zygote_load,omitempty"` // load averages before -> after
	ZygoteLatency    []daemonLatency    `json:"zygote_latency,omitempty"`
	ZygoteThroughput []daemonThroughput `json:"zygote_throughput,omitempty"`

	Skipped []string `json:"skipped,omitempty"`
}

func runBench(c *cli.Context) error {
	if os.Geteuid() != 0 {
		return errors.New("bench: needs root (it runs sandboxes in-process and the baselines as root)")
	}
	rfs, err := rootfs.Store{Root: c.String("store")}.Lookup(c.String("rootfs"))
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	release, err := rfs.Acquire()
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer release()
	ctx := c.Context
	argv := []string{"python3", "-c", "print(1)"}
	rep := &benchReport{Machine: machineLine(), Command: strings.Join(argv, " ")}
	var systems []benchSystem
	switch c.String("only") {
	case "", "engine":
		if systems, err = benchEngine(c, rep, rfs, argv); err != nil {
			return err
		}
	case "daemon":
	default:
		return fmt.Errorf("bench: --only %q: use engine or daemon", c.String("only"))
	}
	if c.String("only") != "engine" {
		if err := benchThroughDaemon(ctx, rep, c.String("socket"), c.String("store"), c.String("rootfs"), c.Int("daemon-runs"), c.Int("pandas-runs"),
			c.IntSlice("concurrency"), c.Duration("round"), c.Int("rounds")); err != nil {
			return fmt.Errorf("bench through the daemon: %w", err)
		}
	}
	if c.Bool("json") {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printBench(rep, systems)
	printDaemonBench(rep)
	printZygoteBench(rep)
	for _, s := range rep.Skipped {
		fmt.Printf("  skipped %s\n", s)
	}
	return nil
}

// benchEngine is the engine part: nsbox's engine in-process against the
// baselines.
func benchEngine(c *cli.Context, rep *benchReport, rfs *rootfs.Rootfs, argv []string) ([]benchSystem, error) {
	ctx := c.Context

	cold, err := container.New(container.Config{CgroupName: "nsbox-bench-" + container.NewID()[:6]})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer cold.Close()
	warm, err := container.New(container.Config{CgroupName: "nsbox-bench-" + container.NewID()[:6], Spares: 2})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer warm.Close()
	engineRun := func(e *container.Engine) func(context.Context) error {
		return func(ctx context.Context) error {
			res, err := e.Run(ctx, container.Spec{RootfsDir: rfs.Dir, Argv: argv})
			if err == nil && res.Status != container.StatusOK {
				err = fmt.Errorf("status %s: %s", res.Status, res.Stderr)
			}
			return err
		}
	}
	systems := []benchSystem{
		{Name: "nsbox (cold)", Note: "clone + cgroup placement on demand", run: engineRun(cold)},
		{Name: "nsbox (spare init)", Note: "init cloned and placed ahead of time", run: engineRun(warm)},
	}
	if _, err := exec.LookPath("bwrap"); err == nil {
		systems = append(systems, benchSystem{Name: "bwrap", Note: "--unshare-all, no seccomp, no cgroup", run: func(ctx context.Context) error {
			return quiet(bwrapCommand(ctx, rfs.Dir, argv))
		}})
	} else {
		rep.Skipped = append(rep.Skipped, "bwrap: not installed (apt-get install bubblewrap)")
	}
	if runc, err := newRuncBaseline(rfs.Dir, argv); err == nil {
		defer runc.close()
		systems = append(systems, benchSystem{Name: "runc run", Note: "Debian's runc, default spec (no userns, no seccomp)", run: runc.run})
	} else {
		rep.Skipped = append(rep.Skipped, "runc: "+err.Error())
	}
	systems = append(systems, benchSystem{Name: "bare python3", Note: "chroot, no isolation", run: func(ctx context.Context) error {
		return quiet(exec.CommandContext(ctx, "chroot", append([]string{rfs.Dir}, argv...)...))
	}})

	// Latency: one run of each system per round, in turn.
	samples := make([][]time.Duration, len(systems))
	for range c.Int("runs") {
		for i, s := range systems {
			t0 := time.Now()
			if err := s.run(ctx); err != nil {
				return nil, fmt.Errorf("bench: %s: %w", s.Name, err)
			}
			samples[i] = append(samples[i], time.Since(t0))
		}
	}
	var bwrapP50 float64
	for i, s := range systems {
		l := latency{System: s.Name, Runs: len(samples[i]), P50Ms: pctMs(samples[i], 0.5), P95Ms: pctMs(samples[i], 0.95)}
		if s.Name == "bwrap" {
			bwrapP50 = l.P50Ms
		}
		rep.Latency = append(rep.Latency, l)
	}
	for i := range rep.Latency {
		if bwrapP50 > 0 {
			rep.Latency[i].VsBwrap = rep.Latency[i].P50Ms / bwrapP50
		}
	}

	// Throughput: rounds of fixed length, systems in turn.
	for _, conc := range c.IntSlice("concurrency") {
		rates := make([][]float64, len(systems))
		for range c.Int("rounds") {
			for i, s := range systems {
				if s.Name == "bare python3" {
					continue
				}
				n, err := throughputRound(ctx, s.run, conc, c.Duration("round"))
				if err != nil {
					return nil, fmt.Errorf("bench: %s at concurrency %d: %w", s.Name, conc, err)
				}
				rates[i] = append(rates[i], n)
			}
		}
		var bw float64
		first := len(rep.Throughput)
		for i, s := range systems {
			if len(rates[i]) == 0 {
				continue
			}
			t := throughput{System: s.Name, Concurrency: conc, RunsPerSec: median(rates[i])}
			if s.Name == "bwrap" {
				bw = t.RunsPerSec
			}
			rep.Throughput = append(rep.Throughput, t)
		}
		for i := first; bw > 0 && i < len(rep.Throughput); i++ {
			rep.Throughput[i].VsBwrap = rep.Throughput[i].RunsPerSec / bw
		}
	}

	return systems, nil
}

func printBench(rep *benchReport, systems []benchSystem) {
	if len(rep.Latency) == 0 {
		return
	}
	fmt.Printf("%s\n%s, alternating\n\n", rep.Machine, rep.Command)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "SYSTEM\tRUNS\tP50 ms\tP95 ms\tP50 vs bwrap\t")
	for _, l := range rep.Latency {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%s\t\n", l.System, l.Runs, l.P50Ms, l.P95Ms, ratio(l.VsBwrap))
	}
	tw.Flush()
	fmt.Println()
	tw = tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "SYSTEM\tCONCURRENCY\tRUNS/S\tVS bwrap\t")
	for _, t := range rep.Throughput {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%s\t\n", t.System, t.Concurrency, t.RunsPerSec, ratio(t.VsBwrap))
	}
	tw.Flush()
	fmt.Println()
	for _, s := range systems {
		if s.Note != "" {
			fmt.Printf("  %s: %s\n", s.Name, s.Note)
		}
	}
}

func ratio(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", r)
}

func pctMs(s []time.Duration, p float64) float64 {
	c := append([]time.Duration(nil), s...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	return float64(c[min(len(c)-1, int(p*float64(len(c))))].Microseconds()) / 1000
}

func median(v []float64) float64 {
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	return c[len(c)/2]
}

// throughputRound runs f from conc workers for d and returns runs/s.
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
					first = cmp(first, err)
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

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func quiet(cmd *exec.Cmd) error {
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// bwrapCommand is the baseline: bubblewrap with every namespace unshared,
// the same rootfs read-only, fresh /proc, /dev and /tmp, uid 1000.
func bwrapCommand(ctx context.Context, root string, argv []string) *exec.Cmd {
	args := []string{
		"--unshare-all", "--die-with-parent", "--new-session",
		"--ro-bind", root, "/", "--proc", "/proc", "--dev", "/dev",
		"--tmpfs", "/tmp", "--tmpfs", "/workspace", "--chdir", "/workspace",
		"--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/workspace",
		"--uid", "1000", "--gid", "1000", "--",
	}
	return exec.CommandContext(ctx, "bwrap", append(args, argv...)...)
}

func machineLine() string {
	host, _ := os.Hostname()
	rel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	load, _ := os.ReadFile("/proc/loadavg")
	la := strings.Fields(string(load))
	if len(la) > 3 {
		la = la[:3]
	}
	return fmt.Sprintf("%s: kernel %s, %d cores, load %s", host, strings.TrimSpace(string(rel)), numCPU(), strings.Join(la, " "))
}

func numCPU() int {
	n, _ := filepath.Glob("/sys/devices/system/cpu/cpu[0-9]*")
	return len(n)
}
