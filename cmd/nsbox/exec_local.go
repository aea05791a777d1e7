package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/agentapi/limits"
	"github.com/nsbox/nsbox/cmd/nsbox/internal/cmdline"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/daemon"
	"github.com/nsbox/nsbox/daemon/policy"
	"github.com/nsbox/nsbox/rootfs"
)

// execInProcess runs x on an engine of its own, through the same core the
// daemon uses: the same validation, the same result (--json prints the
// API's RunResult either way). A piped stdin streams in; stdout and stderr
// stream out unless --json. It takes the limits a default daemon would,
// unless --above-max.
func execInProcess(c *cli.Context, x *execRun) error {
	mx := policy.DefaultMaxLimits()
	if c.Bool("above-max") {
		mx = maxLimits(x.limits.WithDefaults(), mx)
	} else if err := cmdline.CheckMaxima(c, x.limits); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("exec: running a sandbox in-process needs root (run as root, or start `nsbox daemon` and use its socket)")
	}
	eng, err := container.New(container.Config{})
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	defer eng.Close()
	core, err := daemon.New(daemon.Config{
		Engine:        eng,
		Rootfs:        daemon.Store{Store: rootfs.Store{Root: c.String("store")}},
		MaxConcurrent: 1,
		NoQueue:       true,
		Policy:        policy.Policy{DefaultRootfs: c.String("rootfs"), MaxLimits: mx},
	})
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	defer core.Close()

	opts := daemon.RunOptions{Stdin: execStdin(), Seccomp: x.seccomp}
	asJSON := c.Bool("json")
	if !asJSON {
		opts.OnStdout = func(b []byte) { os.Stdout.Write(b) }
		opts.OnStderr = func(b []byte) { os.Stderr.Write(b) }
	}
	ctx, caught, stop := cmdline.Interruptible(c.Context)
	defer stop()
	res, err := core.Run(ctx, x.req, opts)
	if sig := caught(); sig != nil {
		return cmdline.Interrupted(sig) // the run was killed for it
	}
	if err != nil {
		return fmt.Errorf("exec: %w", cmdline.FlagError(c, err))
	}
	if asJSON {
		if err := printResult(res); err != nil {
			return err
		}
	}
	return verdict(res.Status, res.ExitCode, res.Signal, res.Error, x.limits.WithDefaults())
}

// maxLimits is the larger of a and b, limit by limit.
func maxLimits(a, b container.Limits) container.Limits {
	for _, r := range limits.Table {
		r.Put(&a, max(r.Get(a), r.Get(b)))
	}
	return a
}
