// Command nsbox-bench is the benchmark harness (scripts/bench) as a binary
// of its own, so that the nsbox binary carries none of it: `make build`
// puts it in bin/ beside nsbox, and `nsbox bench ARGS` execs it from there.
package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/rootfs"
	"github.com/nsbox/nsbox/scripts/bench"
	"github.com/nsbox/nsbox/scripts/bench/interrupt"
)

func main() {
	// The engine part runs sandboxes in-process: with no nsbox-init beside
	// this binary, it is its own sandbox init.
	container.MaybeInit()
	onSignal(os.Stderr)

	err := newApp().Run(os.Args)
	if interrupted.Load() {
		select {} // the interrupt ends the process once it has cleaned up
	}
	if err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "bench") {
			msg = "bench: " + msg
		}
		fmt.Fprintf(os.Stderr, "nsbox %s\n", msg)
		os.Exit(1)
	}
}

func newApp() *cli.App {
	return &cli.App{
		Name:      "nsbox-bench",
		HelpName:  "nsbox bench",
		UsageText: "nsbox bench [options]  (or bin/nsbox-bench [options])",
		Usage:     "measure start-up and throughput against bubblewrap, runc, crun, gVisor, podman and bare python3",
		Description: `Runs python3 -c 'print(1)' on the same rootfs in every system, alternating
between them round by round so that machine drift hits all of them alike,
and prints medians, p95s and ratios to bubblewrap. Throughput is runs/s at
the given concurrencies, again alternating. Baselines that are not
installed, or cannot run here, are skipped with the reason (apt-get install
bubblewrap runc crun runsc podman).

Then, through the daemon over its Unix socket (a private nsbox daemon,
--nsbox, on temp paths, or --socket): warm (pooled) and cold print(1),
import pandas pre-imported in the pool and cold (on the data-science rootfs
"default", skipped when it is missing), a session exec round trip, a
session's pause + resume, and runs/s at each concurrency, cold and warm in
turn.

Then the zygote (private daemons only, on "default"): import pandas, and
import pandas, matplotlib.pyplot, scipy, sklearn, each cold, forked from
the zygote on request, and pre-forked (a pool refilled from the zygote):
p50/p95 and runs/s at concurrency 2.

Then egress (private daemons only): a 100 MiB download and the time to the
first byte of a new connection through the proxy of a networked sandbox,
against the same Python client on the host talking to the same loopback
server directly; and pip install of a 20 MiB wheel from a local index,
fetched and then from the daemon's package cache (on "default").

Then node (on "default", with Node.js): node -e 'console.log(1)' in the
engine cold against bwrap, then console.log(1) pooled and cold and a
session round trip through private daemons, beside the same in Python.

Then state (a private daemon on "default"): a session holding pandas and
a 10 MB DataFrame forked into 1 and 8 branches, paused and resumed,
parked and revived, beside a plain session create; and a 64 MiB write
into a named volume beside the same into /workspace.

Then e2b (private daemons only, on "default"): Sandbox.create() and
runCode("x += 1") through the unmodified E2B SDK (node, --e2b-client)
against a session's creation and exec through /v1.

Then ports (a private daemon of --rootfs, or --socket): a keystroke's echo
through a terminal in a session (sh; stty raw; cat) against a pty on the
host, and a 3-byte and a 100 MiB GET of python3's http.server in the
session through the port proxy against the same server on the host's
loopback: --runs echoes and small GETs a side, 5 large.

Then landlock (private daemons of --rootfs): print(1) cold, forked from
the zygote on request and pre-forked, each through a daemon with
[security] landlock = "auto" and one with "off", in turn (the first
swapped every round), --daemon-runs rounds a path; the ratio's spread
over five blocks of the run is the machine's noise. README "Benchmarks"
says how to read the tables.`,
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
			&cli.StringFlag{Name: "only", Usage: "run only the `engine`, the `daemon` (with the zygote), the `zygote` part of it, the `egress`, the `node`, the `state`, the `e2b`, the `ports` or the `landlock` part"},
			&cli.StringFlag{Name: "nsbox", Usage: "the nsbox `BINARY` started as the private daemons (default: nsbox beside this binary; nsbox bench passes itself)"},
			&cli.StringFlag{Name: "e2b-client", Value: "tests/e2b-client", Usage: "`DIR` of the E2B SDKs' node client (its node_modules: make deps)"},
		},
		Action: func(c *cli.Context) error {
			return bench.Run(c.Context, bench.Options{
				Store:       c.String("store"),
				Rootfs:      c.String("rootfs"),
				Runs:        c.Int("runs"),
				Round:       c.Duration("round"),
				Rounds:      c.Int("rounds"),
				Concurrency: c.IntSlice("concurrency"),
				Socket:      c.String("socket"),
				DaemonRuns:  c.Int("daemon-runs"),
				PandasRuns:  c.Int("pandas-runs"),
				Only:        c.String("only"),
				E2BClient:   c.String("e2b-client"),
				JSON:        c.Bool("json"),
				Nsbox:       c.String("nsbox"),
			}, os.Stdout)
		},
	}
}

// interrupted is set at the first SIGINT or SIGTERM: what the bench was
// doing fails as its daemons and cgroups go, and says nothing of it.
var interrupted atomic.Bool

// onSignal makes SIGINT and SIGTERM (timeout(1)'s) end the bench cleanly:
// its private daemons stopped, its cgroups removed (interrupt.Run, which
// is bounded), then the exit status of the signal. Signals after the first
// are ignored: timeout(1) signals the whole process group and `nsbox
// bench` relays what it gets, so one interrupt often arrives twice.
func onSignal(w io.Writer) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := (<-sigs).(syscall.Signal)
		interrupted.Store(true)
		fmt.Fprintf(w, "nsbox bench: %v: stopping the private daemons and removing the bench's cgroups\n", sig)
		for _, d := range interrupt.Run() {
			fmt.Fprintf(w, "nsbox bench: cgroup %s is still there\n", d)
		}
		os.Exit(128 + int(sig))
	}()
}
