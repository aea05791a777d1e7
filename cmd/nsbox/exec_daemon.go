package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/agentapi/limits"
	"github.com/nsbox/nsbox/cmd/nsbox/internal/cmdline"
)

// maxDaemonStdin bounds what exec reads from a piped stdin to send along.
const maxDaemonStdin = 32 << 20

// noDaemon is the advice to run in-process: --no-daemon, which needs
// root, so a user who is not root is told so rather than sent to a
// command that cannot work for them.
func noDaemon() string {
	if os.Geteuid() == 0 {
		return "--no-daemon"
	}
	return "--no-daemon as root (in-process sandboxes need root)"
}

// execViaDaemon runs x through the daemon: output streams live, stdin
// (when piped) is sent with the request, and the exit follows the result.
func execViaDaemon(c *cli.Context, cl *client.Client, x *execRun) error {
	if x.seccomp != nil {
		return cmdline.UsageError(c, "--seccomp-profile applies to in-process runs only; add %s", noDaemon())
	}
	req := x.req
	if stdin := execStdin(); stdin != nil {
		in, err := io.ReadAll(io.LimitReader(stdin, maxDaemonStdin+1))
		if err != nil {
			return fmt.Errorf("exec: read stdin: %w", err)
		}
		if len(in) > maxDaemonStdin {
			return cmdline.UsageError(c, "stdin is larger than %s; through the daemon it is sent with the request (use --file, or %s)", humanBytes(maxDaemonStdin), noDaemon())
		}
		if !utf8.Valid(in) {
			return cmdline.UsageError(c, "binary stdin goes only to in-process runs; use --file or %s", noDaemon())
		}
		req.Stdin = string(in)
	}

	ctx, caught, stop := cmdline.Interruptible(c.Context)
	defer stop()
	asJSON := c.Bool("json")
	var onEvent func(agentapi.Event)
	if !asJSON {
		onEvent = func(ev agentapi.Event) {
			var w io.Writer
			switch ev.Type {
			case agentapi.EventStdout:
				w = os.Stdout
			case agentapi.EventStderr:
				w = os.Stderr
			default:
				return
			}
			if ev.DataBase64 != "" {
				b, _ := base64.StdEncoding.DecodeString(ev.DataBase64)
				w.Write(b)
			} else {
				io.WriteString(w, ev.Data)
			}
		}
	}
	res, err := runWaiting(ctx, c.Bool("no-wait"), func() (*agentapi.RunResult, error) { return cl.RunStream(ctx, req, onEvent) })
	if sig := caught(); sig != nil {
		return cmdline.Interrupted(sig) // the daemon ended the run when the stream closed
	}
	if err != nil {
		return fmt.Errorf("exec: %w", cmdline.FlagError(c, err))
	}
	if asJSON {
		if err := printResult(res); err != nil {
			return err
		}
	}
	lim := x.limits
	if res.Status != agentapi.StatusOK && res.Status != agentapi.StatusExitNonzero {
		// Name the limit the daemon applied when the flag did not set it.
		if info, err := cl.Info(c.Context); err == nil {
			lim = lim.Or(limits.FromWire(info.DefaultLimits))
		}
	}
	return verdict(res.Status, res.ExitCode, res.Signal, res.Error, lim)
}

// maxBusyWait bounds how long exec waits for a full daemon.
var maxBusyWait = 2 * time.Minute

// runWaiting calls run, and again while the daemon answers that it is full
// (429), after the pause its Retry-After asks for, for up to maxBusyWait
// in all; then, or at once with noWait, it gives up with exit status
// exitBusy. A 429 comes before the run starts: nothing was printed yet.
func runWaiting(ctx context.Context, noWait bool, run func() (*agentapi.RunResult, error)) (*agentapi.RunResult, error) {
	deadline := time.Now().Add(maxBusyWait)
	said := false
	for {
		res, err := run()
		var ae *agentapi.Error
		if err == nil || !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests {
			return res, err
		}
		if noWait {
			return nil, &exitError{code: exitBusy, err: fmt.Errorf("the daemon is full (%s); try again later", ae.Message)}
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, &exitError{code: exitBusy, err: fmt.Errorf("the daemon stayed full for %s (%s); giving up", maxBusyWait, ae.Message)}
		}
		wait := ae.RetryAfter
		if wait <= 0 {
			wait = time.Second
		}
		wait = min(wait, 30*time.Second, left)
		if !said {
			fmt.Fprintf(os.Stderr, "nsbox: the daemon is full; waiting for a slot (up to %s; --no-wait fails at once)\n", maxBusyWait)
			said = true
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}
