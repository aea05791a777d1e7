package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/nsbox/nsbox/agentapi/limits"

	"github.com/nsbox/nsbox/daemon/caller"
	"github.com/nsbox/nsbox/daemon/errdefs"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/runner"
	"github.com/nsbox/nsbox/container/session"
	"github.com/nsbox/nsbox/daemon/wire"
)

// CreateSession starts a session and returns once its interpreter is
// ready.
func (k *Keeper) CreateSession(ctx context.Context, req *agentapi.SessionRequest) (*agentapi.Session, error) {
	return k.CreateSessionWith(ctx, req, Options{Processes: req.Processes})
}

// Options carry what a transport adds to a session request; of them a
// wire request of /v1 sets only Processes (its "processes").
type Options struct {
	// ID names the session; empty: a fresh container.NewID(). The E2B
	// endpoint uses longer ids, since an id is half of a sandbox's
	// address there.
	ID string
	// Processes starts the sandbox's process agent with the session
	// (Processes: commands beside the interpreter).
	Processes bool
	// Home is the working directory and $HOME of the session's
	// interpreter and commands (session.Options.Home); "" is the
	// workspace, /workspace. E2B's sandboxes are at /home/user.
	Home string
	// NoIdleEnd: the session ends at its lifetime only, never for being
	// idle (an E2B sandbox lives until its timeout).
	NoIdleEnd bool
	// Meta is the transport's record of the session (at most
	// MaxMetaBytes of JSON), which the core keeps with it and never
	// reads: SessionMeta returns it, SetSessionMeta replaces it, a park
	// writes it into the session's record.json and a revive keeps it, so
	// a transport needs no store of its own. A fork's branches get
	// ForkOptions.Meta.
	Meta json.RawMessage

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
	Home      string                  `json:"home,omitempty"`

	// meta is the live session's Meta (parkRecord.Meta once parked).
	meta *meta
}

// CreateSessionWith is CreateSession with a transport's options.
func (k *Keeper) CreateSessionWith(ctx context.Context, req *agentapi.SessionRequest, so Options) (*agentapi.Session, error) {
	if err := k.core.Admit(); err != nil {
		return nil, err
	}
	if k.mgr == nil {
		return nil, ErrNoSessions
	}
	// Every field is checked before the rootfs, the volumes or a sandbox
	// are touched.
	pol := k.core.Policy()
	j, err := pol.ValidateSession(req, k.parked != nil, so.Processes)
	if err != nil {
		return nil, err
	}
	m, err := checkMeta(so.Meta)
	if err != nil {
		return nil, err
	}
	dir, release, err := k.core.AcquireRootfs(j.Rootfs)
	if err != nil {
		return nil, err
	}
	mounts, release, err := k.core.Mounts(ctx, req.Volumes, req.Datasets, release)
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
	endEgress, err := k.core.StartEgress(&spec, j.Network)
	if err != nil {
		release()
		return nil, k.core.Classify(err)
	}
	if endEgress != nil {
		rel := release
		release = func() { endEgress(); rel() }
	}
	uid := caller.Owner(ctx)
	if so.owner != nil {
		uid = *so.owner
	}
	o := &origin{Request: *req, Processes: so.Processes, NoIdleEnd: so.NoIdleEnd, Home: so.Home, meta: &meta{b: m}}
	o.Request.Files = nil
	sess, err := k.mgr.Create(ctx, session.Options{
		ID: spec.ID, Init: req.Init, Rootfs: j.Rootfs, RootfsDir: dir, Release: release, Limits: j.Limits,
		IdleTimeout: j.IdleTimeout, Env: spec.Env, Files: spec.Files, Owner: uid, Origin: o,
		Lifetime: j.Lifetime, AllowedImports: req.AllowedImports,
		IdleAction: j.IdleAction, LifetimeAction: req.LifetimeAction, BeforeStart: spec.BeforeStart, Processes: so.Processes, NoIdleEnd: so.NoIdleEnd, Home: so.Home,
		Language: j.Lang.Name, Runner: j.Lang.Runner, Transform: j.Lang.Transform,
		Mounts: mounts, CommandOutputBytes: pol.Sessions.CommandOutputBytes,
	})
	if err != nil {
		return nil, k.core.Classify(err)
	}
	out := k.wireSession(sess.Info())
	return &out, nil
}

// Sessions lists the sessions the caller may see: its own, or all for an
// admin.
func (k *Keeper) Sessions(ctx context.Context) []agentapi.Session {
	out := []agentapi.Session{}
	if k.mgr != nil {
		for _, in := range k.mgr.List() {
			if k.mayUse(ctx, in.Owner) {
				out = append(out, k.wireSession(in))
			}
		}
	}
	if k.parked != nil {
		for _, p := range k.parked.list() {
			if k.mayUse(ctx, p.rec.Owner) {
				out = append(out, p.wire())
			}
		}
	}
	return out
}

// Session describes one session.
func (k *Keeper) Session(ctx context.Context, id string) (*agentapi.Session, error) {
	if p := k.parkedFor(ctx, id); p != nil {
		out := p.wire()
		return &out, nil
	}
	return k.onSession(ctx, id, nil)
}

// PauseSession freezes a session: its processes keep their memory and use
// no CPU until ResumeSession or its next exec. A session running an exec
// is a conflict.
func (k *Keeper) PauseSession(ctx context.Context, id string) (*agentapi.Session, error) {
	return k.onSession(ctx, id, (*session.Session).Pause)
}

// ResumeSession thaws a paused session (others are left as they are).
func (k *Keeper) ResumeSession(ctx context.Context, id string) (*agentapi.Session, error) {
	return k.onSession(ctx, id, func(s *session.Session) error { return s.Resume(ctx) })
}

// onSession finds the caller's session, applies do to it (when not nil)
// and describes it.
func (k *Keeper) onSession(ctx context.Context, id string, do func(*session.Session) error) (*agentapi.Session, error) {
	sess, err := k.session(ctx, id)
	if err != nil {
		return nil, err
	}
	if do != nil {
		if err := do(sess); err != nil {
			return nil, k.core.Classify(err)
		}
	}
	out := k.wireSession(sess.Info())
	return &out, nil
}

// DeleteSession ends a session and removes it.
func (k *Keeper) DeleteSession(ctx context.Context, id string) error {
	if p := k.parkedFor(ctx, id); p != nil {
		k.deleteParked(p)
		return nil
	}
	if _, err := k.session(ctx, id); err != nil {
		return err
	}
	return k.core.Classify(k.mgr.Delete(id))
}

// Exec runs a cell in a session; opts.OnStdout/OnStderr stream its output
// and opts.OnResult is called with the result, as for the daemon's Run.
func (k *Keeper) Exec(ctx context.Context, id string, req *agentapi.ExecRequest, opts ExecOptions) (*agentapi.RunResult, error) {
	// The request is checked whole before a parked session is revived or
	// anything is sent to the interpreter.
	timeout, err := k.core.Policy().ValidateExec(req)
	if err != nil {
		return nil, err
	}
	var revived *agentapi.CarriedSession
	if p := k.parkedFor(ctx, id); p != nil {
		if revived, err = k.revive(ctx, p); err != nil {
			return nil, err
		}
	}
	sess, err := k.session(ctx, id)
	if err != nil {
		return nil, err
	}
	if opts.OnStart != nil {
		opts.OnStart(id)
	}
	ereq := runner.ExecRequest{Code: req.Code, Context: req.Context, Env: req.Env, Timeout: timeout, OnStdout: opts.OnStdout, OnStderr: opts.OnStderr}
	res, err := sess.Exec(ctx, ereq)
	if p := k.parkedFor(ctx, id); errors.Is(err, session.ErrDead) && p != nil && revived == nil {
		// Parked while this exec waited for the session (an idle park, a
		// park call): revive it and run there.
		if revived, err = k.revive(ctx, p); err != nil {
			return nil, err
		}
		if sess, err = k.session(ctx, id); err != nil {
			return nil, err
		}
		res, err = sess.Exec(ctx, ereq)
	}
	if err != nil {
		return nil, k.core.Classify(err)
	}
	out := &agentapi.RunResult{ID: id, WallMs: res.Wall.Milliseconds(), Files: wire.Files(res.Files), FilesTruncated: res.FilesTruncated}
	if revived != nil {
		out.Revived, out.NotCarried = true, revived.NotCarried
	}
	out.Network = k.core.EgressReport(id)
	wire.Cell(out, res.Result)
	out.Status = string(res.Status)
	out.ExitCode, out.Signal = wire.CellExit(out.Status)
	out.Error = res.Error
	if info := sess.Info(); info.State == session.StateDead {
		out.SessionDead = true
		out.Error = info.DeadReason
	}
	k.onExec(out.Status)
	k.log.Info("exec finished", append(caller.Attrs(ctx), "session", id, "status", out.Status, "wall_ms", out.WallMs, "session_dead", out.SessionDead)...)
	if opts.OnResult != nil {
		opts.OnResult(out)
	}
	return out, nil
}

// ListFiles lists a session's workspace.
func (k *Keeper) ListFiles(ctx context.Context, id string) (*agentapi.FileList, error) {
	sess, err := k.session(ctx, id)
	if err != nil {
		return nil, err
	}
	entries, files, truncated, err := sess.List(ctx, "")
	if err != nil {
		return nil, k.core.Classify(err)
	}
	sums := make(map[string]string, len(files))
	for _, f := range files {
		sums[f.Path] = f.SHA256
	}
	out := &agentapi.FileList{Files: []agentapi.WorkspaceFile{}, FilesTruncated: truncated}
	for _, e := range entries {
		wf := agentapi.WorkspaceFile{Path: e.Path, Size: e.Size, Mode: e.Mode, ModTime: e.ModTime.UTC(), Dir: e.Dir, Symlink: e.Symlink, SHA256: sums[e.Path]}
		if !e.Dir && !e.Symlink {
			wf.Mime = wire.Mime(e.Path, nil)
		}
		out.Files = append(out.Files, wf)
	}
	return out, nil
}

// WriteFile writes a file into a session's workspace (mode 0644).
func (k *Keeper) WriteFile(ctx context.Context, id, path string, data []byte) error {
	sess, err := k.sessionFile(ctx, id, path)
	if err != nil {
		return err
	}
	return k.core.Classify(sess.WriteFile(ctx, path, data, 0o644))
}

// ReadFile reads a file of a session's workspace, of at most max bytes.
func (k *Keeper) ReadFile(ctx context.Context, id, path string, max int64) ([]byte, error) {
	sess, err := k.sessionFile(ctx, id, path)
	if err != nil {
		return nil, err
	}
	data, err := sess.ReadFile(ctx, path, max)
	return data, k.core.Classify(err)
}

// RemoveFile removes a file (or an empty directory) of a session's
// workspace.
func (k *Keeper) RemoveFile(ctx context.Context, id, path string) error {
	sess, err := k.sessionFile(ctx, id, path)
	if err != nil {
		return err
	}
	return k.core.Classify(sess.Remove(ctx, path))
}

// session resolves a session the caller may use; another uid's session is
// not found, exactly as one that does not exist.
func (k *Keeper) session(ctx context.Context, id string) (*session.Session, error) {
	if k.mgr == nil {
		return nil, ErrNoSessions
	}
	sess, err := k.mgr.Get(id)
	if err == nil && !k.mayUse(ctx, sess.Info().Owner) {
		err = fmt.Errorf("session %q: %w", id, session.ErrNotFound)
	}
	if err != nil && k.parkedFor(ctx, id) != nil {
		return nil, errParked(id)
	}
	return sess, k.core.Classify(err)
}

// sessionFile resolves the session and checks a file path in it.
func (k *Keeper) sessionFile(ctx context.Context, id, path string) (*session.Session, error) {
	sess, err := k.session(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := container.ValidPath(path); err != nil {
		return nil, errdefs.Field("path", "%v", err)
	}
	return sess, nil
}

func (k *Keeper) wireSession(in session.Info) agentapi.Session {
	out := agentapi.Session{
		ID: in.ID, Rootfs: in.Rootfs, Language: in.Language, State: string(in.State), DeadStatus: string(in.DeadStatus), DeadReason: in.DeadReason,
		CreatedAt: in.Created.UTC(), LastUsedAt: in.LastUsed.UTC(), ExecCount: in.ExecCount,
		IdleTimeoutMs: in.IdleTimeout.Milliseconds(), Limits: limits.ToWire(in.Limits), Pooled: in.Pooled,
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
	out.Network = k.core.Network(in.ID)
	out.Ports = k.portStats(in.ID)
	return out
}
