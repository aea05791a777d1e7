package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// benchBinary is the benchmark harness, a binary of its own
// (cmd/nsbox-bench) so that nsbox carries none of it.
const benchBinary = "nsbox-bench"

// benchCommand runs nsbox-bench from beside this binary, as git runs its
// git-* commands: `nsbox bench ARGS` is `nsbox-bench --nsbox SELF ARGS`.
func benchCommand() *cli.Command {
	return &cli.Command{
		Name:            "bench",
		Usage:           "measure start-up and throughput against bubblewrap, runc, crun, gVisor, podman and bare python3 (runs nsbox-bench)",
		UsageText:       "nsbox bench [options]  (nsbox bench --help lists them)",
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			bin, err := findBench(self)
			if err != nil {
				return err
			}
			cmd := exec.CommandContext(c.Context, bin, append([]string{"--nsbox", self}, c.Args().Slice()...)...)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
			return benchExit(bin, runRelaying(cmd))
		},
	}
}

// benchExit is nsbox bench's answer to how nsbox-bench (bin) ended (err,
// from its Wait): its exit status, its own error already printed; or,
// when a signal killed it (the OOM killer, a SIGKILL, a SIGPIPE from a
// reader gone), 128+N and a line that says so: nsbox-bench had no chance
// to print anything, and silence would read as a bench that ran.
func benchExit(bin string, err error) error {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return err
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		sig := ws.Signal()
		return &exitError{code: 128 + int(sig), err: fmt.Errorf("bench: %s was killed by %s (%v) before it finished: its report is missing or cut short", bin, unix.SignalName(sig), sig)}
	}
	return &exitError{code: ee.ExitCode(), err: errors.New("")} // nsbox-bench printed its own error
}

// findBench is nsbox-bench beside self, the nsbox executable.
func findBench(self string) (string, error) {
	bin := filepath.Join(filepath.Dir(self), benchBinary)
	st, err := os.Stat(bin)
	if err != nil || !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("bench: no %s beside %s: the benchmark harness is a binary of its own; "+
			"build it with `make build` (bin/%s) or `go build -o %s ./cmd/nsbox-bench` from the source tree, or run `make bench`",
			benchBinary, self, benchBinary, bin)
	}
	return bin, nil
}

// runRelaying runs cmd, passing it the SIGINT and SIGTERM this process
// gets instead of dying of them: nsbox-bench then stops its private
// daemons and removes its cgroups before it exits (killed with its parent,
// it left them behind).
func runRelaying(cmd *exec.Cmd) error {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case sig := <-sigs:
				_ = cmd.Process.Signal(sig)
			case <-done:
				return
			}
		}
	}()
	return cmd.Wait()
}
