package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

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
			&cli.DurationFlag{Name: "timeout", Value: d.Timeout, Usage: "wall-clock limit; the whole sandbox is killed at the deadline"},
			&cli.StringFlag{Name: "memory", Value: humanSize(d.MemoryBytes), Usage: "memory limit (swap is off)"},
			&cli.Int64Flag{Name: "pids", Value: d.Pids, Usage: "maximum number of processes and threads"},
			&cli.Float64Flag{Name: "cpus", Value: d.CPUs, Usage: "CPU quota in cores"},
			&cli.StringFlag{Name: "disk", Value: humanSize(d.DiskBytes), Usage: "size of /workspace (and of /tmp, /dev/shm each)"},
			&cli.StringFlag{Name: "output", Value: humanSize(d.OutputBytes), Usage: "cap per output stream; passing it kills the run"},
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

func execSpec(c *cli.Context) (container.Spec, error) {
	var spec container.Spec
	spec.Argv = c.Args().Slice()
	if len(spec.Argv) == 0 {
		return spec, errors.New("exec: no command given; usage: nsbox exec [flags] -- CMD [ARGS...]")
	}
	l := container.Limits{Timeout: c.Duration("timeout"), Pids: c.Int64("pids"), CPUs: c.Float64("cpus")}
	for _, s := range []struct {
		flag string
		dst  *int64
	}{{"memory", &l.MemoryBytes}, {"disk", &l.DiskBytes}, {"output", &l.OutputBytes}} {
		n, err := parseSize(c.String(s.flag))
		if err != nil {
			return spec, fmt.Errorf("--%s: %w", s.flag, err)
		}
		*s.dst = n
	}
	if l.Timeout <= 0 || l.Pids <= 0 || l.CPUs <= 0 || l.MemoryBytes <= 0 || l.DiskBytes <= 0 || l.OutputBytes <= 0 {
		return spec, errors.New("exec: --timeout, --memory, --pids, --cpus, --disk and --output must be positive")
	}
	spec.Limits = l
	for _, kv := range c.StringSlice("env") {
		k, _, ok := strings.Cut(kv, "=")
		if !ok {
			return spec, fmt.Errorf("--env %q: want K=V", kv)
		}
		if err := container.ValidEnvKey(k); err != nil {
			return spec, fmt.Errorf("--env: %w", err)
		}
		spec.Env = append(spec.Env, kv)
	}
	for _, arg := range c.StringSlice("file") {
		local, dst, ok := strings.Cut(arg, ":")
		if !ok {
			dst = filepath.Base(local)
		}
		if err := container.ValidPath(dst); err != nil {
			return spec, fmt.Errorf("--file %s: %w", arg, err)
		}
		data, err := os.ReadFile(local)
		if err != nil {
			return spec, fmt.Errorf("--file: %w", err)
		}
		spec.Files = append(spec.Files, container.File{Path: dst, Data: data})
	}
	if p := c.String("seccomp-profile"); p != "" {
		f, err := os.Open(p)
		if err != nil {
			return spec, fmt.Errorf("--seccomp-profile: %w", err)
		}
		prof, err := seccomp.Load(f)
		f.Close()
		if err != nil {
			return spec, fmt.Errorf("--seccomp-profile %s: %w", p, err)
		}
		if spec.Seccomp, err = prof.Compile(); err != nil {
			return spec, fmt.Errorf("--seccomp-profile %s: %w", p, err)
		}
	}
	return spec, nil
}

func runExec(c *cli.Context) error {
	spec, err := execSpec(c)
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
			return execViaDaemon(c, cl, spec)
		case c.IsSet("socket"):
			return fmt.Errorf("exec: the daemon at %s does not answer: %v (use --no-daemon to run in-process)", c.String("socket"), herr)
		}
	}
	if c.Bool("verbose") {
		fmt.Fprintln(os.Stderr, "nsbox: running in-process (no daemon answered)")
	}
	if os.Geteuid() != 0 {
		return errors.New("exec: running a sandbox in-process needs root (run as root, or start `nsbox daemon` and use its socket)")
	}
	rfs, err := rootfs.Store{Root: c.String("store")}.Lookup(c.String("rootfs"))
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	release, err := rfs.Acquire()
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	defer release()
	spec.RootfsDir = rfs.Dir
	spec.Stdin = os.Stdin
	asJSON := c.Bool("json")
	if !asJSON {
		spec.Stdout, spec.Stderr = os.Stdout, os.Stderr
	}

	eng, err := container.New(container.Config{})
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	defer eng.Close()
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := eng.Run(ctx, spec)
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(jsonResult(res)); err != nil {
			return err
		}
	}
	return verdict(string(res.Status), res.ExitCode, res.Signal, res.Error, spec.Limits)
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

// jsonResult is the --json shape: the result with text output as strings.
func jsonResult(r *container.Result) any {
	type out struct {
		*container.Result
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
		WallMs   int64  `json:"wall_ms"`
		CPUMs    int64  `json:"cpu_ms"`
		WallTime any    `json:"wall_time,omitempty"`
		CPUTime  any    `json:"cpu_time,omitempty"`
	}
	return out{Result: r, Stdout: string(r.Stdout), Stderr: string(r.Stderr), WallMs: r.WallTime.Milliseconds(), CPUMs: r.CPUTime.Milliseconds()}
}
