package daemon

import (
	"context"
	"errors"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container/runner"
	"github.com/nsbox/nsbox/container/runner/guest"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/guests"
	"github.com/nsbox/nsbox/daemon/lang"
	"github.com/nsbox/nsbox/daemon/policy"
	"github.com/nsbox/nsbox/daemon/wire"
)

// GuestRef names a guest interpreter of a session: the language of its
// cells, its context (one interpreter per context) and the working
// directory it starts in ("": the sandbox's home).
type GuestRef struct {
	Language, Context, Cwd string
}

// GuestExec runs a cell in a guest interpreter beside session id's own
// (container/runner/guest): bash, JavaScript, TypeScript, R or Java next to a
// Python session with processes (an E2B sandbox), in its sandbox, with
// its files. The context's guest starts at its first cell; its variables
// (and bash's cwd) stay from cell to cell. A zero req.TimeoutMs takes the
// session's exec timeout; the output cap is the session's, per stream,
// and the guest's lifetime output counts against the process agent's
// cap. A guest is not carried by a park or a fork.
func (d *Daemon) GuestExec(ctx context.Context, id string, ref GuestRef, req *agentapi.ExecRequest, opts RunOptions) (*agentapi.RunResult, error) {
	timeout, err := d.pol.Load().ValidateExec(req)
	if err != nil {
		return nil, err
	}
	l, kind, sess, err := d.guestFor(ctx, id, ref)
	if err != nil {
		return nil, err
	}
	a, err := d.Processes(ctx, id)
	if err != nil {
		return nil, err
	}
	if timeout <= 0 {
		timeout = time.Duration(sess.Limits.TimeoutMs) * time.Millisecond
	}
	g, err := d.guests.Guest(ctx, a, guests.Ref{Session: id, Context: ref.Context, Kind: kind, Cwd: ref.Cwd})
	if err != nil {
		return nil, guestErr(err)
	}
	if opts.OnStart != nil {
		opts.OnStart(id)
	}
	res, err := g.Exec(ctx, guest.ExecRequest{Code: req.Code, Env: req.Env, Timeout: timeout, OutputBytes: sess.Limits.OutputBytes,
		Transform: l.Transform, OnStdout: opts.OnStdout, OnStderr: opts.OnStderr})
	if err != nil {
		return nil, guestErr(err)
	}
	out := &agentapi.RunResult{ID: id, WallMs: res.Wall.Milliseconds()}
	wire.Cell(out, &res.Result)
	out.Status = string(res.Status)
	out.ExitCode, out.Signal = wire.CellExit(out.Status)
	if kind == guest.Bash && res.ExitCode != 0 {
		out.ExitCode = res.ExitCode
	}
	out.Error = res.Error
	d.log.Info("guest exec finished", "session", id, "language", l.Name, "context", ref.Context, "status", out.Status, "wall_ms", out.WallMs)
	if opts.OnResult != nil {
		opts.OnResult(out)
	}
	return out, nil
}

// StartGuest starts a session context's guest interpreter now, if it has
// none: a cwd that is no directory is refused here, not at its first cell.
func (d *Daemon) StartGuest(ctx context.Context, id string, ref GuestRef) error {
	_, kind, _, err := d.guestFor(ctx, id, ref)
	if err != nil {
		return err
	}
	a, err := d.Processes(ctx, id)
	if err != nil {
		return err
	}
	_, err = d.guests.Guest(ctx, a, guests.Ref{Session: id, Context: ref.Context, Kind: kind, Cwd: ref.Cwd})
	return guestErr(err)
}

// HasGuest reports whether a session's context has a live guest.
func (d *Daemon) HasGuest(id, context string) bool { return d.guests.Has(id, context) }

// DropGuest ends a session context's guest interpreter, if it has one:
// its next cell starts a fresh one.
func (d *Daemon) DropGuest(id, context string) { d.guests.Drop(id, context) }

// guestFor resolves ref for session id: its language, guest kind and
// context, on the session's rootfs (a field error on language that says
// what the rootfs has, else).
func (d *Daemon) guestFor(ctx context.Context, id string, ref GuestRef) (*lang.Descriptor, guest.Kind, *agentapi.Session, error) {
	l, kind, err := lang.GuestOf(ref.Language)
	if err == nil {
		err = policy.ValidContext(ref.Context)
	}
	if err != nil {
		return nil, "", nil, err
	}
	sess, err := d.Session(ctx, id)
	if err == nil {
		_, err = d.pol.Load().Language(l.Name, sess.Rootfs)
	}
	return l, kind, sess, err
}

// guestErr classes a guest's errors: what the request asked that cannot
// be (a cwd that is no directory, a NUL in a bash cell, no node on the
// rootfs) is an invalid argument, an agent gone with its sandbox a dead
// session; a guest that died between its start and its cell is started
// again by the next.
func guestErr(err error) error {
	switch {
	case errors.Is(err, guest.ErrNoBytes), errors.Is(err, runner.ErrUnsupported):
		return errdefs.In(errdefs.ErrInvalidArgument, err)
	case errors.Is(err, runner.ErrDead):
		return errdefs.In(errdefs.ErrUnavailable, err)
	}
	return classify(err)
}
