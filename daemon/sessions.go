package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/policy"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/runner"
	"github.com/nsbox/nsbox/container/session"
	"github.com/nsbox/nsbox/daemon/wire"
)

// CreateSession starts a session and returns once its interpreter is
// ready.
func (d *Daemon) CreateSession(ctx context.Context, req *agentapi.SessionRequest) (*agentapi.Session, error) {
	return d.CreateSessionWith(ctx, req, SessionOptions{})
}

// SessionOptions carry what a transport adds to a session request; no
// wire request of /v1 sets them.
type SessionOptions struct {
	// ID names the session; empty: a fresh container.NewID(). The E2B
	// endpoint uses longer ids, since an id is half of a sandbox's
	// address there.
	ID string
	// Processes starts the sandbox's process agent with the session
	// (Processes: commands beside the interpreter).
	Processes bool
	// NoIdleEnd: the session ends at its lifetime only, never for being
	// idle (an E2B sandbox lives until its timeout).
	NoIdleEnd bool

	// owner, when set, owns the session instead of the caller: a fork's
	// branches are their parent's owner's, a revived session its own.
	owner *int64
}

// origin is what a session was made from (session.Options.Origin): a fork
// or a revive makes a session from it again, with its workspace copied
// instead of its input files.
type origin struct {
	Request   agentapi.SessionRequest `json:"request"`
	Processes bool                    `json:"processes,omitempty"`
	NoIdleEnd bool                    `json:"no_idle_end,omitempty"`
}

// CreateSessionWith is CreateSession with a transport's options.
func (d *Daemon) CreateSessionWith(ctx context.Context, req *agentapi.SessionRequest, so SessionOptions) (*agentapi.Session, error) {
	if err := d.admit(); err != nil {
		return nil, err
	}
	if d.sessions == nil {
		return nil, ErrNoSessions
	}
	// Every field is checked before the rootfs, the volumes or a sandbox
	// are touched.
	j, err := d.pol.Load().ValidateSession(req, d.parked != nil, so.Processes)
	if err != nil {
		return nil, err
	}
	dir, release, err := d.acquireRootfs(j.Rootfs)
	if err != nil {
		return nil, err
	}
	mounts, release, err := d.mounts(ctx, req.Volumes, req.Datasets, release)
	if err != nil {
		release()
		return nil, err
	}
	// The session's egress lives as long as its sandbox: the proxy ends
	// with the sandbox's release.
	id := so.ID
	if id == "" {
		id = container.NewID()
	}
	spec := container.Spec{ID: id, Env: j.Env, Files: j.Files}
	nr, err := d.startEgress(&spec, j.Network)
	if err != nil {
		release()
		return nil, classify(err)
	}
	if nr != nil {
		rel := release
		release = func() { d.takeEgress(nr, true); rel() }
	}
	uid := owner(ctx)
	if so.owner != nil {
		uid = *so.owner
	}
	o := &origin{Request: *req, Processes: so.Processes, NoIdleEnd: so.NoIdleEnd}
	o.Request.Files = nil
	sess, err := d.sessions.Create(ctx, session.Options{
		ID: spec.ID, Rootfs: j.Rootfs, RootfsDir: dir, Release: release, Limits: j.Limits,
		IdleTimeout: j.IdleTimeout, Env: spec.Env, Files: spec.Files, Owner: uid, Origin: o,
		Lifetime: j.Lifetime, AllowedImports: req.AllowedImports,
		IdleAction: j.IdleAction, LifetimeAction: req.LifetimeAction, BeforeStart: spec.BeforeStart, Processes: so.Processes, NoIdleEnd: so.NoIdleEnd,
		Language: j.Lang.Name, Runner: j.Lang.Runner, Transform: j.Lang.Transform,
		Mounts: mounts,
	})
	if err != nil {
		return nil, classify(err)
	}
	out := d.wireSession(sess.Info())
	return &out, nil
}

// Sessions lists the sessions the caller may see: its own, or all for an
// admin.
func (d *Daemon) Sessions(ctx context.Context) []agentapi.Session {
	out := []agentapi.Session{}
	if d.sessions != nil {
		for _, in := range d.sessions.List() {
			if d.mayUse(ctx, in.Owner) {
				out = append(out, d.wireSession(in))
			}
		}
	}
	if d.parked != nil {
		for _, p := range d.parked.list() {
			if d.mayUse(ctx, p.rec.Owner) {
				out = append(out, p.wire())
			}
		}
	}
	return out
}

// Session describes one session.
func (d *Daemon) Session(ctx context.Context, id string) (*agentapi.Session, error) {
	if p := d.parkedFor(ctx, id); p != nil {
		out := p.wire()
		return &out, nil
	}
	return d.onSession(ctx, id, nil)
}

// PauseSession freezes a session: its processes keep their memory and use
// no CPU until ResumeSession or its next exec. A session running an exec
// is a conflict.
func (d *Daemon) PauseSession(ctx context.Context, id string) (*agentapi.Session, error) {
	return d.onSession(ctx, id, (*session.Session).Pause)
}

// ResumeSession thaws a paused session (others are left as they are).
func (d *Daemon) ResumeSession(ctx context.Context, id string) (*agentapi.Session, error) {
	return d.onSession(ctx, id, func(s *session.Session) error { return s.Resume(ctx) })
}

// onSession finds the caller's session, applies do to it (when not nil)
// and describes it.
func (d *Daemon) onSession(ctx context.Context, id string, do func(*session.Session) error) (*agentapi.Session, error) {
	sess, err := d.session(ctx, id)
	if err != nil {
		return nil, err
	}
	if do != nil {
		if err := do(sess); err != nil {
			return nil, classify(err)
		}
	}
	out := d.wireSession(sess.Info())
	return &out, nil
}

// DeleteSession ends a session and removes it.
func (d *Daemon) DeleteSession(ctx context.Context, id string) error {
	if p := d.parkedFor(ctx, id); p != nil {
		d.deleteParked(p)
		return nil
	}
	if _, err := d.session(ctx, id); err != nil {
		return err
	}
	return classify(d.sessions.Delete(id))
}

// Exec runs a cell in a session; opts.OnStdout/OnStderr stream its output
// and opts.OnResult is called with the result, as for Run.
func (d *Daemon) Exec(ctx context.Context, id string, req *agentapi.ExecRequest, opts RunOptions) (*agentapi.RunResult, error) {
	// The request is checked whole before a parked session is revived or
	// anything is sent to the interpreter.
	timeout, err := d.pol.Load().ValidateExec(req)
	if err != nil {
		return nil, err
	}
	var revived *agentapi.CarriedSession
	if p := d.parkedFor(ctx, id); p != nil {
		if revived, err = d.revive(ctx, p); err != nil {
			return nil, err
		}
	}
	sess, err := d.session(ctx, id)
	if err != nil {
		return nil, err
	}
	if opts.OnStart != nil {
		opts.OnStart(id)
	}
	ereq := runner.ExecRequest{Code: req.Code, Context: req.Context, Env: req.Env, Timeout: timeout, OnStdout: opts.OnStdout, OnStderr: opts.OnStderr}
	res, err := sess.Exec(ctx, ereq)
	if p := d.parkedFor(ctx, id); errors.Is(err, session.ErrDead) && p != nil && revived == nil {
		// Parked while this exec waited for the session (an idle park, a
		// park call): revive it and run there.
		if revived, err = d.revive(ctx, p); err != nil {
			return nil, err
		}
		if sess, err = d.session(ctx, id); err != nil {
			return nil, err
		}
		res, err = sess.Exec(ctx, ereq)
	}
	if err != nil {
		return nil, classify(err)
	}
	out := &agentapi.RunResult{ID: id, WallMs: res.Wall.Milliseconds(), Files: wire.Files(res.Files), FilesTruncated: res.FilesTruncated}
	if revived != nil {
		out.Revived, out.NotCarried = true, revived.NotCarried
	}
	if nr := d.egressRun(id); nr != nil {
		out.Network = d.takeEgress(nr, false)
	}
	wire.Cell(out, res.Result)
	out.Status = string(res.Status)
	out.ExitCode, out.Signal = wire.CellExit(out.Status)
	out.Error = res.Error
	if info := sess.Info(); info.State == session.StateDead {
		out.SessionDead = true
		out.Error = info.DeadReason
	}
	d.metrics.SessionExec(out.Status)
	d.log.Info("exec finished", append(callerAttrs(ctx), "session", id, "status", out.Status, "wall_ms", out.WallMs, "session_dead", out.SessionDead)...)
	if opts.OnResult != nil {
		opts.OnResult(out)
	}
	return out, nil
}

// ListFiles lists a session's workspace.
func (d *Daemon) ListFiles(ctx context.Context, id string) (*agentapi.FileList, error) {
	sess, err := d.session(ctx, id)
	if err != nil {
		return nil, err
	}
	entries, files, truncated, err := sess.List(ctx, "")
	if err != nil {
		return nil, classify(err)
	}
	sums := make(map[string]string, len(files))
	for _, f := range files {
		sums[f.Path] = f.SHA256
	}
	out := &agentapi.FileList{Files: []agentapi.WorkspaceFile{}, FilesTruncated: truncated}
	for _, e := range entries {
		wf := agentapi.WorkspaceFile{Path: e.Path, Size: e.Size, Mode: e.Mode, ModTime: e.ModTime.UTC(), Dir: e.Dir, Symlink: e.Symlink, SHA256: sums[e.Path]}
		if !e.Dir && !e.Symlink {
			wf.Mime = MimeOf(e.Path, nil)
		}
		out.Files = append(out.Files, wf)
	}
	return out, nil
}

// WriteFile writes a file into a session's workspace (mode 0644).
func (d *Daemon) WriteFile(ctx context.Context, id, path string, data []byte) error {
	sess, err := d.sessionFile(ctx, id, path)
	if err != nil {
		return err
	}
	return classify(sess.WriteFile(ctx, path, data, 0o644))
}

// ReadFile reads a file of a session's workspace, of at most max bytes.
func (d *Daemon) ReadFile(ctx context.Context, id, path string, max int64) ([]byte, error) {
	sess, err := d.sessionFile(ctx, id, path)
	if err != nil {
		return nil, err
	}
	data, err := sess.ReadFile(ctx, path, max)
	return data, classify(err)
}

// RemoveFile removes a file (or an empty directory) of a session's
// workspace.
func (d *Daemon) RemoveFile(ctx context.Context, id, path string) error {
	sess, err := d.sessionFile(ctx, id, path)
	if err != nil {
		return err
	}
	return classify(sess.Remove(ctx, path))
}

// session resolves a session the caller may use; another uid's session is
// not found, exactly as one that does not exist.
func (d *Daemon) session(ctx context.Context, id string) (*session.Session, error) {
	if d.sessions == nil {
		return nil, ErrNoSessions
	}
	sess, err := d.sessions.Get(id)
	if err == nil && !d.mayUse(ctx, sess.Info().Owner) {
		err = fmt.Errorf("session %q: %w", id, session.ErrNotFound)
	}
	if err != nil && d.parkedFor(ctx, id) != nil {
		return nil, errParked(id)
	}
	return sess, classify(err)
}

// sessionFile resolves the session and checks a file path in it.
func (d *Daemon) sessionFile(ctx context.Context, id, path string) (*session.Session, error) {
	sess, err := d.session(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := container.ValidPath(path); err != nil {
		return nil, errdefs.Field("path", "%v", err)
	}
	return sess, nil
}

func (d *Daemon) wireSession(in session.Info) agentapi.Session {
	out := agentapi.Session{
		ID: in.ID, Rootfs: in.Rootfs, Language: in.Language, State: string(in.State), DeadStatus: string(in.DeadStatus), DeadReason: in.DeadReason,
		CreatedAt: in.Created.UTC(), LastUsedAt: in.LastUsed.UTC(), ExecCount: in.ExecCount,
		IdleTimeoutMs: in.IdleTimeout.Milliseconds(), Limits: policy.WireLimits(in.Limits), Pooled: in.Pooled,
		ExpiresAt: in.Expires.UTC(), AllowedImports: in.AllowedImports, IdleAction: in.IdleAction,
		LifetimeAction: in.LifetimeAction,
	}
	if !in.Paused.IsZero() {
		at := in.Paused.UTC()
		out.PausedAt = &at
	}
	if in.Owner >= 0 {
		uid := uint32(in.Owner)
		out.OwnerUID = &uid
	}
	if nr := d.egressRun(in.ID); nr != nil {
		out.Network = nr.wire
	}
	return out
}
