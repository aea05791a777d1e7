package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/cmd/nsbox/internal/cmdline"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/rootfs"
	"github.com/nsbox/nsbox/seccomp"
)

func execCommand() *cli.Command {
	return &cli.Command{
		Name:      "exec",
		Usage:     "run one command in a fresh sandbox",
		ArgsUsage: "[flags] -- CMD [ARGS...]",
		Description: `Runs CMD in fresh user, pid, net, mount, ipc, uts and cgroup namespaces on a
read-only rootfs, as uid 1000 with no capabilities and a seccomp allowlist.
stdout and stderr stream live; a piped or redirected stdin is passed through
(a terminal is not: for an interactive Python prompt use nsbox repl); the
exit code is the command's. A limit verdict is named on stderr and exits 124
(timeout) or 137 (out of memory, output limit, killed). When the daemon is
full, exec waits and retries as it says (up to 2 minutes; --no-wait: not at
all) and exits 75 if it stays full; Ctrl-C ends the run and exits 130. CMD
is the sandbox's pid 1, which ignores the signals it has no handler for
(kill -TERM $$ does nothing); --init makes it pid 1's child, as docker
run --init does. Flags go before CMD: what follows CMD is CMD's.

   echo 'print(1)' | nsbox exec -- python3 -
   nsbox exec --memory 256M --timeout 5s --file data.csv -- python3 -c 'print(open("data.csv").read())'`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "rootfs", Value: rootfs.DefaultName, Usage: "rootfs `NAME` from the store", EnvVars: []string{"NSBOX_ROOTFS"}},
			&cli.StringFlag{Name: "store", Value: rootfs.DefaultStoreRoot, Usage: "rootfs store `DIR`", EnvVars: []string{"NSBOX_ROOTFS_STORE"}},
		}, append(append(append(cmdline.LimitFlags(false, true), cmdline.NetworkFlags()...), cmdline.MountFlags()...),
			&cli.StringFlag{Name: "seccomp-profile", Usage: "Docker-format seccomp profile `FILE` instead of nsbox's default"},
			&cli.BoolFlag{Name: "init", Usage: "run a minimal init as pid 1 (as docker run --init): it forwards signals to CMD, reaps orphans and exits with CMD's status, 128+N for signal N"},
			&cli.BoolFlag{Name: "json", Usage: "print the whole result as one JSON object instead of streaming"},
			&cli.StringFlag{Name: "socket", Value: agentapi.DefaultSocket, Usage: "daemon `SOCKET`; the run goes through the daemon when it answers", EnvVars: []string{"NSBOX_SOCKET"}},
			&cli.BoolFlag{Name: "no-daemon", Usage: "run in-process even when a daemon answers (needs root)"},
			&cli.BoolFlag{Name: "above-max", Usage: "in-process: allow limits above a default daemon's maxima (10m, 8 GiB, 4096 pids, the host's CPUs)"},
			&cli.BoolFlag{Name: "no-wait", Usage: "fail at once (exit 75) when the daemon is full instead of waiting for a slot"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "say on stderr whether the run goes through the daemon or in-process"},
		)...),
		Action: runExec,
	}
}

// execRun is what `nsbox exec` runs: the API request (only the limits the
// flags set: the daemon's defaults apply to the rest), all the limits the
// flags give (for in-process runs and the verdict), and a seccomp program
// from --seccomp-profile (in-process only).
type execRun struct {
	req     *agentapi.RunRequest
	limits  container.Limits
	seccomp seccomp.Program
}

func execRequest(c *cli.Context) (*execRun, error) {
	x := &execRun{req: &agentapi.RunRequest{Argv: c.Args().Slice(), Init: c.Bool("init")}}
	if len(x.req.Argv) == 0 {
		return nil, cmdline.UsageError(c, "no command given; usage: nsbox exec [flags] -- CMD [ARGS...]")
	}
	if err := checkTerminalStdin(x.req.Argv); err != nil {
		return nil, err
	}
	if c.IsSet("rootfs") {
		x.req.Rootfs = c.String("rootfs")
	}
	// Only the limits the flags set go into the request: the daemon's
	// defaults (or, in-process, the engine's) apply to the rest.
	var err error
	if x.limits, err = cmdline.ReadLimits(c); err != nil {
		return nil, err
	}
	x.req.Limits = cmdline.WireLimits(x.limits)
	if x.req.Env, err = cmdline.ReadEnv(c); err != nil {
		return nil, err
	}
	if x.req.Files, err = cmdline.ReadFiles(c); err != nil {
		return nil, err
	}
	if x.req.Network, err = cmdline.ReadNetwork(c); err != nil {
		return nil, err
	}
	if x.req.Volumes, x.req.Datasets, err = cmdline.ReadMounts(c); err != nil {
		return nil, err
	}
	if p := c.String("seccomp-profile"); p != "" {
		f, err := os.Open(p)
		if err != nil {
			return nil, cmdline.UsageError(c, "--seccomp-profile: %v", err)
		}
		prof, err := seccomp.Load(f)
		f.Close()
		if err != nil {
			return nil, cmdline.UsageError(c, "--seccomp-profile %s: %v", p, err)
		}
		if x.seccomp, err = prof.Compile(); err != nil {
			return nil, cmdline.UsageError(c, "--seccomp-profile %s: %v", p, err)
		}
	}
	return x, nil
}

func runExec(c *cli.Context) error {
	x, err := execRequest(c)
	if err != nil {
		return err
	}
	if !c.Bool("no-daemon") {
		cl := &client.Client{Socket: c.String("socket")}
		hctx, cancel := context.WithTimeout(c.Context, time.Second)
		_, herr := cl.Health(hctx)
		cancel()
		switch {
		case herr == nil:
			if c.Bool("verbose") {
				fmt.Fprintf(os.Stderr, "nsbox: running through the daemon at %s\n", c.String("socket"))
			}
			return execViaDaemon(c, cl, x)
		case os.Geteuid() != 0:
			// In-process needs root, so --no-daemon is no way out: say why
			// the daemon was no way in (the client's error names the cause
			// and its fix: the group, or starting the daemon).
			return fmt.Errorf("exec: %v; without a daemon, a sandbox needs root", herr)
		case c.IsSet("socket"):
			return fmt.Errorf("exec: %v (use --no-daemon to run in-process)", herr)
		}
		if c.Bool("verbose") {
			fmt.Fprintf(os.Stderr, "nsbox: running in-process (no daemon answered: %v)\n", herr)
		}
	} else if c.Bool("verbose") {
		fmt.Fprintln(os.Stderr, "nsbox: running in-process (--no-daemon)")
	}
	if x.req.Network != nil {
		// The egress proxy and its policy are the daemon's.
		return cmdline.UsageError(c, "--allow-net needs the daemon (its [network] config says what may be allowed); start it (nsbox daemon) or drop --allow-net")
	}
	if len(x.req.Volumes) > 0 || len(x.req.Datasets) > 0 {
		// Volumes and datasets are the daemon's.
		return cmdline.UsageError(c, "--volume and --dataset need the daemon (it keeps the volumes and the [[datasets]] config); start it (nsbox daemon) or drop them")
	}
	return execInProcess(c, x)
}

// printResult prints a run's result for --json: the API's RunResult,
// whichever way the run went.
func printResult(res *agentapi.RunResult) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// verdict turns a result into the process exit: the command's own code,
// 128+N when signal N killed it, or a one-line explanation and 124/137
// when a limit ended the run. Session
// execs go through it too: an exception exits 1 (its traceback is printed
// already), an interrupted cell 130. A zero limit in l is one the daemon
// chose, and goes unnamed.
func verdict(status string, code int, signal, errMsg string, l container.Limits) error {
	var msg string
	switch status {
	case agentapi.StatusOK:
		return nil
	case agentapi.StatusExitNonzero:
		return &exitError{code: code, err: errSilent}
	case agentapi.StatusException:
		return &exitError{code: 1, err: errSilent}
	case agentapi.StatusCancelled:
		return &exitError{code: exitInterrupted, err: errors.New("interrupted")}
	case agentapi.StatusTimeout:
		msg, code = "timeout", exitTimeout
		if l.Timeout > 0 {
			msg += " after " + cmdline.ShortDuration(l.Timeout)
		}
	case agentapi.StatusOOM:
		msg, code = "out of memory", exitKilled
		if l.MemoryBytes > 0 {
			msg += fmt.Sprintf(" (limit %s)", humanBytes(l.MemoryBytes))
		}
	case agentapi.StatusOutputLimit:
		msg, code = "output limit reached; the run was killed", exitKilled
		if l.OutputBytes > 0 {
			msg = fmt.Sprintf("output limit of %s per stream reached; the run was killed", humanBytes(l.OutputBytes))
		}
	case agentapi.StatusKilled:
		msg, code = "killed", exitKilled
		if signal != "" {
			msg = "killed by " + signal
			if n := unix.SignalNum(signal); n > 0 {
				code = 128 + int(n) // as a shell gives it: 143 for SIGTERM
			}
		}
	default:
		msg, code = fmt.Sprintf("run ended with status %s: %s", status, errMsg), 1
	}
	return &exitError{code: code, err: errors.New(msg)}
}

// errSilent marks an exit whose reason the command already printed.
var errSilent = errors.New("")
