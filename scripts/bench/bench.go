// Package bench is the harness behind `nsbox bench`: python3 -c 'print(1)'
// in nsbox's engine against bubblewrap, runc, crun, gVisor's runsc, podman
// and a bare chroot'ed python3, then warm, cold, session and zygote
// requests through the daemon over its
// Unix socket. Every system runs in turn, round after round, so that
// machine drift hits all of them alike; the report gives medians, p95s and
// ratios, as tables or as JSON.
//
// It needs root and a rootfs. It is not part of the nsbox binary:
// cmd/nsbox-bench turns flags into [Options] and calls [Run], and
// `nsbox bench` execs that binary from beside itself.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nsbox/nsbox/rootfs"
	"github.com/nsbox/nsbox/scripts/bench/interactive"
	"github.com/nsbox/nsbox/scripts/bench/llcost"
	"github.com/nsbox/nsbox/scripts/bench/measure"
)

// Options are the settings of one bench. The zero value is not usable:
// the counts and concurrencies must be at least 1 (see [Options.Validate]).
type Options struct {
	Store  string // rootfs store directory
	Rootfs string // rootfs name for the engine's runs and the daemon's default pool

	Runs        int           // rounds of the engine's latency comparison
	Round       time.Duration // length of one throughput round
	Rounds      int           // throughput rounds per system and concurrency
	Concurrency []int         // concurrencies for throughput

	// Socket is a daemon to measure instead of starting a private one.
	Socket     string
	DaemonRuns int // rounds of the latency comparison through the daemon
	PandasRuns int // rounds of the import pandas comparison through the daemon

	// E2BClient is the directory of the E2B SDKs' node client
	// (tests/e2b-client, with its node_modules).
	E2BClient string

	// Only is "engine", "daemon", "egress", "node", "state", "e2b",
	// "ports" or "landlock" to run one part, "" for all.
	Only string
	JSON bool // print the report as JSON instead of tables

	// Nsbox is the nsbox binary started as the private daemons
	// (`nsbox daemon ...`). Empty: "nsbox" beside this process's
	// executable (bin/nsbox beside bin/nsbox-bench after `make build`);
	// `nsbox bench` passes itself.
	Nsbox string
}

// Validate reports settings the bench cannot run with.
func (o Options) Validate() error {
	switch o.Only {
	case "", "engine", "daemon", "zygote", "egress", "e2b", "node", "state", "ports", "landlock":
	default:
		return fmt.Errorf("bench: --only %q: use engine, daemon, zygote, egress, e2b, node, state, ports or landlock", o.Only)
	}
	if (o.Only == "zygote" || o.Only == "landlock") && o.Socket != "" {
		return fmt.Errorf("bench: --only %s measures private daemons: drop --socket", o.Only)
	}
	for _, c := range []struct {
		flag string
		n    int
	}{{"--runs", o.Runs}, {"--rounds", o.Rounds}, {"--daemon-runs", o.DaemonRuns}, {"--pandas-runs", o.PandasRuns}} {
		if c.n < 1 {
			return fmt.Errorf("bench: %s %d: must be at least 1", c.flag, c.n)
		}
	}
	if o.Round <= 0 {
		return fmt.Errorf("bench: --round %v: must be positive", o.Round)
	}
	if len(o.Concurrency) == 0 {
		return errors.New("bench: --concurrency: give at least one")
	}
	for _, c := range o.Concurrency {
		if c < 1 {
			return fmt.Errorf("bench: --concurrency %d: must be at least 1", c)
		}
	}
	return nil
}

// nsbox is the binary to start as the private daemons.
func (o Options) nsbox() (string, error) {
	if o.Nsbox != "" {
		return o.Nsbox, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("bench: the nsbox binary: %w (give --nsbox)", err)
	}
	path := filepath.Join(filepath.Dir(exe), "nsbox")
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("bench: no nsbox binary beside %s (make build puts both in bin/; or give --nsbox PATH)", exe)
	}
	return path, nil
}

// Run measures what o selects and writes the report to out.
func Run(ctx context.Context, o Options, out io.Writer) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("bench: needs root (it runs sandboxes in-process and the baselines as root)")
	}
	rfs, err := rootfs.Store{Root: o.Store}.Lookup(o.Rootfs)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	release, err := rfs.Acquire()
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer release()
	argv := []string{"python3", "-c", "print(1)"}
	rep := &report{Machine: measure.MachineLine(), Command: strings.Join(argv, " ")}
	var systems []system
	runSections(ctx, o.Only, rep, []part{
		{"engine", "engine", func() (err error) { systems, err = benchEngine(ctx, o, rep, rfs, argv); return err }},
		{"through the daemon", "daemon zygote", func() error { return benchThroughDaemon(ctx, o, rep) }},
		{"egress", "egress", func() error { return benchEgress(ctx, o, rep) }},
		{"node", "node", func() error { return benchNode(ctx, o, rep) }},
		{"state", "state", func() error { return benchState(ctx, o, rep) }},
		{"e2b", "e2b", func() error { return benchE2B(ctx, o, rep) }},
		{"ports", "ports", func() error { return benchPorts(ctx, o, rep) }},
		{"landlock", "landlock", func() error { return benchLandlock(ctx, o, rep) }},
	})
	werr := writeReport(out, rep, systems, o.JSON)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("bench: interrupted: %w", err)
	}
	if werr != nil {
		return werr
	}
	if len(rep.Failed) > 0 {
		return fmt.Errorf("bench: %d section(s) failed (the others' figures are above):\n  %s", len(rep.Failed), strings.Join(rep.Failed, "\n  "))
	}
	return nil
}

// part is one part of the bench: its name in the report, the --only
// values that select it, and its run.
type part struct {
	name, only string
	run        func() error
}

// runSections runs the sections only selects ("" for all) in turn until
// ctx ends. A failed section is recorded in rep.Failed and the next one
// runs: one refusal on a loaded machine costs its own section's figures,
// not the others'; Run exits non-zero at the end.
func runSections(ctx context.Context, only string, rep *report, secs []part) {
	for _, sec := range secs {
		if only != "" && !slices.Contains(strings.Fields(sec.only), only) {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if err := sec.run(); err != nil {
			rep.Failed = append(rep.Failed, fmt.Sprintf("%s: %v", sec.name, err))
		}
	}
}

// report is everything measured; --json prints it as it is.
type report struct {
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

	Egress     []egressRow `json:"egress,omitempty"`
	EgressLoad string      `json:"egress_load,omitempty"` // load averages before -> after

	Node     []compareRow `json:"node,omitempty"`
	NodeLoad string       `json:"node_load,omitempty"` // load averages before -> after

	State     []compareRow `json:"state,omitempty"`
	StateLoad string       `json:"state_load,omitempty"` // load averages before -> after

	E2B     []e2bRow `json:"e2b,omitempty"`
	E2BLoad string   `json:"e2b_load,omitempty"` // load averages before -> after

	Ports     []interactive.Row `json:"ports,omitempty"`
	PortsLoad string            `json:"ports_load,omitempty"` // load averages before -> after

	Landlock     []llcost.Row `json:"landlock,omitempty"`
	LandlockLoad string       `json:"landlock_load,omitempty"` // load averages before -> after

	Skipped []string `json:"skipped,omitempty"`
	Failed  []string `json:"failed,omitempty"` // sections that ended with an error, and why
}

// latency is one system's figures in the engine part.
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
