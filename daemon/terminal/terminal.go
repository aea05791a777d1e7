// Package terminal is a terminal in a session's sandbox, for /v1 and the
// CLI: a process on a pseudo-terminal the sandbox's process agent opens
// in the sandbox's own devpts (container/procs, Config.Pty), read as
// output and an exit, written as input, resized and signalled.
package terminal

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// Terminal is one open terminal and its one reader. Close kills it.
type Terminal struct {
	a       *procs.Agent
	p       *procs.Process
	sel     procs.Selector
	release func() // at Close: the session's hold (daemon.OpenTerminal)
}

// Open starts req's process on a terminal through the session's agent a;
// Close calls release (nil: nothing).
func Open(ctx context.Context, a *procs.Agent, req *agentapi.TerminalRequest, release func()) (*Terminal, error) {
	cfg := procs.Config{Cmd: req.Cmd, Args: req.Args, Cwd: req.Cwd, Env: map[string]string{"TERM": "xterm-256color"},
		Pty: &procs.Size{Rows: req.Rows, Cols: req.Cols}}
	if cfg.Cmd == "" {
		cfg.Cmd, cfg.Args = "/bin/bash", []string{"-i", "-l"}
	}
	for k, v := range req.Env {
		cfg.Env[k] = v
	}
	if cfg.Pty.Rows == 0 {
		cfg.Pty.Rows = 24
	}
	if cfg.Pty.Cols == 0 {
		cfg.Pty.Cols = 80
	}
	p, err := a.Start(ctx, cfg)
	if err != nil {
		return nil, classify(err)
	}
	return &Terminal{a: a, p: p, sel: procs.Selector{Pid: p.Pid}, release: release}, nil
}

// classify gives the agent's errors their class (errdefs).
func classify(err error) error {
	switch {
	case errors.Is(err, procs.ErrStart), errors.Is(err, procs.ErrNotPty):
		return errdefs.In(errdefs.ErrInvalidArgument, err)
	case errors.Is(err, procs.ErrNotFound):
		return errdefs.In(errdefs.ErrNotFound, err)
	case errors.Is(err, procs.ErrClosed):
		return errdefs.In(errdefs.ErrSessionDead, err)
	}
	return err
}

// Pid is the terminal's process, as the sandbox numbers it.
func (t *Terminal) Pid() uint32 { return t.p.Pid }

// Next returns the terminal's next output, or its exit (then io.EOF
// follows). A reader that falls behind by procs.SlowTimeout is dropped:
// procs.ErrSlow, and the daemon holds nothing more for it.
func (t *Terminal) Next(ctx context.Context) ([]byte, *agentapi.TerminalExit, error) {
	for {
		ev, err := t.p.Next(ctx)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case ev.Data != nil && len(ev.Data.Pty) > 0:
			return ev.Data.Pty, nil, nil
		case ev.End != nil:
			return nil, &agentapi.TerminalExit{ExitCode: ev.End.ExitCode, Signal: int(ev.End.Signal), Status: ev.End.Status}, nil
		}
	}
}

// Input writes what is typed.
func (t *Terminal) Input(ctx context.Context, b []byte) error {
	return classify(t.a.SendInput(ctx, t.sel, b))
}

// Resize sets the window size (the foreground job gets SIGWINCH).
func (t *Terminal) Resize(ctx context.Context, rows, cols uint16) error {
	return classify(t.a.Resize(ctx, t.sel, procs.Size{Rows: rows, Cols: cols}))
}

// Signal sends sig (1 to 31) to the terminal's process group; SIGKILL
// to its whole session.
func (t *Terminal) Signal(ctx context.Context, sig int) error {
	if sig < 1 || sig > 31 {
		return errdefs.Field("signal", "%d is not a signal from 1 to 31", sig)
	}
	return classify(t.a.Signal(ctx, t.sel, syscall.Signal(sig)))
}

// Close kills the terminal's process and all of its session, and ends
// the subscription. Its error is not returned: a terminal that has
// exited is not found, one whose sandbox ended has no agent, and the
// sandbox's end kills it at the latest.
func (t *Terminal) Close() {
	defer t.p.Close()
	if t.release != nil {
		defer t.release()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = t.a.Signal(ctx, t.sel, syscall.SIGKILL)
}
