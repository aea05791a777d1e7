package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nsbox/nsbox/daemon/policy"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/rootfs"
	"github.com/nsbox/nsbox/seccomp"
)

func execCommand() *cli.Command {
	d := container.DefaultLimits()
	return &cli.Command{
		Name:      "exec",
		Usage:     "run one command in a fresh sandbox",
		ArgsUsage: "[flags] -- CMD [ARGS...]",
		Description: `Runs CMD in fresh user, pid, net, mount, ipc, uts and cgroup namespaces on a
read-only rootfs, as uid 1000 with no capabilities and a seccomp allowlist.
stdout and stderr stream live; stdin is passed through; the exit code is the
command's. A limit verdict is named on stderr and exits 124 (timeout) or 137
(out of memory, output limit, killed).

   echo 'print(1)' | nsbox exec -- python3 -
   nsbox exec --memory 256M --timeout 5s --file data.csv -- python3 -c 'print(open("data.csv").read())'`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "rootfs", Value: rootfs.DefaultName, Usage: "rootfs `NAME` from the store", EnvVars: []string{"NSBOX_ROOTFS"}},
			&cli.StringFlag{Name: "store", Value: rootfs.DefaultStoreRoot, Usage: "rootfs store `DIR`", EnvVars: []string{"NSBOX_ROOTFS_STORE"}},
			&cli.DurationFlag{Name: "timeout", Usage: "wall-clock limit; the whole sandbox is killed at the deadline" + dflt(d.Timeout.String())},
			&cli.StringFlag{Name: "memory", Usage: "memory limit (swap is off)" + dflt(humanSize(d.MemoryBytes))},
			&cli.Int64Flag{Name: "pids", Usage: "maximum number of processes and threads" + dflt(fmt.Sprint(d.Pids))},
			&cli.Float64Flag{Name: "cpus", Usage: "CPU quota in cores" + dflt(fmt.Sprint(d.CPUs))},
			&cli.StringFlag{Name: "disk", Usage: "size of /workspace (and of /tmp, /dev/shm each)" + dflt(humanSize(d.DiskBytes))},
			&cli.StringFlag{Name: "output", Usage: "cap per output stream; passing it kills the run" + dflt(humanSize(d.OutputBytes))},
			&cli.StringSliceFlag{Name: "file", Usage: "copy `LOCAL[:PATH]` into /workspace before the run (repeatable)"},
			&cli.StringSliceFlag{Name: "env", Usage: "set `K=V` in the sandbox (repeatable); nothing else of your environment goes in"},
			&cli.StringFlag{Name: "seccomp-profile", Usage: "Docker-format seccomp profile `FILE` instead of nsbox's default"},
			&cli.BoolFlag{Name: "json", Usage: "print the whole result as one JSON object instead of streaming"},
			&cli.StringFlag{Name: "socket", Value: agentapi.DefaultSocket, Usage: "daemon `SOCKET`; the run goes through the daemon when it answers", EnvVars: []string{"NSBOX_SOCKET"}},
			&cli.BoolFlag{Name: "no-daemon", Usage: "run in-process even when a daemon answers (needs root)"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "say on stderr whether the run goes through the daemon or in-process"},
		},
		Action: runExec,
	}
}

func humanSize(n int64) string { return fmt.Sprintf("%dM", n>>20) }

// dflt names a limit's default: the daemon's own through a daemon, the
// engine's in-process.
func dflt(v string) string { return " (default: the daemon's; " + v + " in-process)" }

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
	x := &execRun{req: &agentapi.RunRequest{Argv: c.Args().Slice()}}
	if len(x.req.Argv) == 0 {
		return nil, errors.New("exec: no command given; usage: nsbox exec [flags] -- CMD [ARGS...]")
	}
	if c.IsSet("rootfs") {
		x.req.Rootfs = c.String("rootfs")
	}
	// Only the limits the flags set go into the request: the daemon's
	// defaults (or, in-process, the engine's) apply to the rest.
	l := container.Limits{Timeout: c.Duration("timeout"), Pids: c.Int64("pids"), CPUs: c.Float64("cpus")}
	for _, s := range []struct {
		flag string
		dst  *int64
	}{{"memory", &l.MemoryBytes}, {"disk", &l.DiskBytes}, {"output", &l.OutputBytes}} {
		if !c.IsSet(s.flag) {
			continue
		}
		n, err := parseSize(c.String(s.flag))
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", s.flag, err)
		}
		*s.dst = n
	}
	for flag, v := range map[string]float64{"timeout": float64(l.Timeout), "memory": float64(l.MemoryBytes), "pids": float64(l.Pids),
		"cpus": l.CPUs, "disk": float64(l.DiskBytes), "output": float64(l.OutputBytes)} {
		if c.IsSet(flag) && v <= 0 {
			return nil, fmt.Errorf("exec: --%s must be positive", flag)
		}
	}
	x.limits = l
	if l != (container.Limits{}) {
		wire := policy.WireLimits(l)
		x.req.Limits = &wire
	}
	for _, kv := range c.StringSlice("env") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("--env %q: want K=V", kv)
		}
		if err := container.ValidEnvKey(k); err != nil {
			return nil, fmt.Errorf("--env: %w", err)
		}
		if x.req.Env == nil {
			x.req.Env = map[string]string{}
		}
		x.req.Env[k] = v
	}
	for _, arg := range c.StringSlice("file") {
		local, dst, ok := strings.Cut(arg, ":")
		if !ok {
			dst = filepath.Base(local)
		}
		if err := container.ValidPath(dst); err != nil {
			return nil, fmt.Errorf("--file %s: %w", arg, err)
		}
		data, err := os.ReadFile(local)
		if err != nil {
			return nil, fmt.Errorf("--file: %w", err)
		}
		x.req.Files = append(x.req.Files, agentapi.File{Path: dst, ContentBase64: base64.StdEncoding.EncodeToString(data)})
	}
	if p := c.String("seccomp-profile"); p != "" {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("--seccomp-profile: %w", err)
		}
		prof, err := seccomp.Load(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("--seccomp-profile %s: %w", p, err)
		}
		if x.seccomp, err = prof.Compile(); err != nil {
			return nil, fmt.Errorf("--seccomp-profile %s: %w", p, err)
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
		case c.IsSet("socket"):
			return fmt.Errorf("exec: the daemon at %s does not answer: %v (use --no-daemon to run in-process)", c.String("socket"), herr)
		}
	}
	if c.Bool("verbose") {
		fmt.Fprintln(os.Stderr, "nsbox: running in-process (no daemon answered)")
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

// verdict turns a result into the process exit: the command's own code, or
// a one-line explanation and 124/137 when a limit ended the run.
func verdict(status string, code int, signal, errMsg string, l container.Limits) error {
	var msg string
	switch container.Status(status) {
	case container.StatusOK:
		return nil
	case container.StatusExitNonzero:
		return &exitError{code: code, err: errSilent}
	case container.StatusTimeout:
		msg, code = fmt.Sprintf("timeout after %s", l.Timeout), 124
	case container.StatusOOM:
		msg, code = fmt.Sprintf("out of memory (limit %s)", humanBytes(l.MemoryBytes)), 137
	case container.StatusOutputLimit:
		msg, code = fmt.Sprintf("output limit of %s per stream reached; the run was killed", humanBytes(l.OutputBytes)), 137
	case container.StatusKilled:
		msg, code = "killed", 137
		if signal != "" {
			msg = "killed by " + signal
		}
	default:
		msg = fmt.Sprintf("run ended with status %s: %s", status, errMsg)
	}
	return &exitError{code: code, err: errors.New(msg)}
}

// errSilent marks an exit whose reason the command already printed.
var errSilent = errors.New("")
