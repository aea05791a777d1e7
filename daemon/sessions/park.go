package sessions

import (
	"archive/tar"
	"bufio"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/runner"
	"github.com/nsbox/nsbox/container/session"
	"github.com/nsbox/nsbox/daemon/caller"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// Park errors.
var (
	// ErrNoPark: the daemon was started without a directory for parked
	// sessions.
	ErrNoPark = errdefs.New(errdefs.ErrUnavailable, "this daemon cannot park sessions: it has no state directory (run it as the service, with state_dir)")
	// ErrParkFull: parked sessions would hold more than [sessions]
	// park_max_bytes.
	ErrParkFull = errdefs.New(errdefs.ErrNoSpace, "no room to park the session; it stays live: delete parked sessions or raise [sessions] park_max_bytes")
	// ErrParkExpired: the session was parked longer than its retention.
	ErrParkExpired = errdefs.New(errdefs.ErrNotFound, "the session was parked longer than [sessions] park_retention and is gone")
)

// ParkSession writes a session to disk and ends its sandbox: its Python
// state (as ForkSession carries it), an archive of its workspace and a
// record, under the daemon's state directory, root-only. It stays listed
// as parked, uses no memory, survives a daemon restart, and revives on
// its next exec or ReviveSession. A busy or dead session is a conflict;
// past [sessions] park_max_bytes the park fails (ErrParkFull) and the
// session stays live, unharmed.
func (k *Keeper) ParkSession(ctx context.Context, id string) (*agentapi.Session, error) {
	if k.parked == nil {
		return nil, ErrNoPark
	}
	if err := k.core.Admit(); err != nil {
		return nil, err
	}
	sess, o, err := k.carriable(ctx, id)
	if err != nil {
		return nil, err
	}
	out, err := k.park(ctx, sess, o)
	if err != nil {
		return nil, err
	}
	k.log.Info("session parked", append(caller.Attrs(ctx), "session", id)...)
	return out, nil
}

// parkIdle parks a session whose idle timeout passed (idle_action
// "park") or whose lifetime ended (lifetime_action "park");
// session.Config.Park.
func (k *Keeper) parkIdle(sess *session.Session) error {
	o, _ := sess.Options().Origin.(*origin)
	if k.parked == nil || o == nil {
		return fmt.Errorf("session %s: %w", sess.ID(), ErrNoPark)
	}
	if _, err := k.park(context.Background(), sess, o); err != nil {
		return err
	}
	k.log.Info("session parked by its idle timeout or lifetime", "session", sess.ID())
	return nil
}

// park writes sess to the park store and ends its sandbox.
func (k *Keeper) park(ctx context.Context, sess *session.Session, o *origin) (*agentapi.Session, error) {
	info := sess.Info()
	var out agentapi.Session
	// Meta sets wait for the park's end (meta.seal), then go to the
	// parked record, or, the park failed, to the live session again.
	defer o.meta.unseal()
	err := sess.Capture(ctx, stateCap(info.Limits), func(st *runner.State, ws *container.Workspace) error {
		m := o.meta.seal()
		now := k.clock.Now()
		wire := k.wireSession(info)
		// The lifetime stops while parked: a revive gets what is left,
		// or, parked by the end of it (lifetime_action "park"), the
		// whole lifetime it was given again.
		left := info.Expires.Sub(now)
		if left <= 0 {
			left = info.Lifetime
		}
		rec := parkRecord{Version: parkVersion, Session: wire, Origin: *o, Owner: info.Owner,
			ParkedAt: now, Expires: now.Add(k.core.Policy().Sessions.ParkRetention), LifetimeLeftMs: max(left.Milliseconds(), 1), NotCarried: st.NotCarried,
			Meta: m}
		p, err := k.parked.write(rec, st, ws, k.core.Policy().Sessions.ParkMaxBytes-k.snaps.usedNow())
		if err != nil {
			return err
		}
		sess.End("parked")
		p.mu.Unlock() // its sandbox is gone: it may be revived now
		out = p.wire()
		return nil
	})
	if err != nil {
		return nil, k.core.Classify(err)
	}
	return &out, nil
}

// ReviveSession brings a parked session back in a fresh sandbox: its
// state restored, its workspace extracted, its id, owner and options
// kept. Reviving a live session describes it.
func (k *Keeper) ReviveSession(ctx context.Context, id string) (*agentapi.CarriedSession, error) {
	if p := k.parkedFor(ctx, id); p != nil {
		return k.revive(ctx, p)
	}
	sess, err := k.session(ctx, id)
	if err != nil {
		return nil, err
	}
	return &agentapi.CarriedSession{Session: k.wireSession(sess.Info()), NotCarried: []agentapi.NotCarried{}}, nil
}

// parkedFor is the parked session id if the caller may use it.
func (k *Keeper) parkedFor(ctx context.Context, id string) *parked {
	if k.parked == nil {
		return nil
	}
	p := k.parked.get(id)
	if p == nil || !k.mayUse(ctx, p.rec.Owner) {
		return nil
	}
	return p
}

func (k *Keeper) revive(ctx context.Context, p *parked) (*agentapi.CarriedSession, error) {
	if err := k.core.Admit(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.rec.Session.ID
	if p.gone { // revived (or deleted) while this call waited
		sess, err := k.session(ctx, id)
		if err != nil {
			return nil, err
		}
		return &agentapi.CarriedSession{Session: k.wireSession(sess.Info()), NotCarried: []agentapi.NotCarried{}}, nil
	}
	left := p.lifetimeLeft()
	if left <= 0 || k.clock.Now().After(p.rec.Expires) {
		k.parked.remove(p)
		return nil, fmt.Errorf("session %s: %w", id, ErrParkExpired)
	}
	o := p.rec.Origin
	o.Request.LifetimeMs = max(left.Milliseconds(), 1)
	owner := p.rec.Owner
	out, err := k.load(ctx, p, &o, Options{ID: id, Processes: o.Processes, NoIdleEnd: o.NoIdleEnd, Home: o.Home, Meta: p.rec.Meta, owner: &owner})
	if err != nil {
		return nil, err
	}
	k.parked.remove(p)
	k.log.Info("session revived", append(caller.Attrs(ctx), "session", id, "parked_for", time.Since(p.rec.ParkedAt))...)
	return out, nil
}

// load makes a session of so from p's files (a parked session's or a
// snapshot's) and o: its state restored, its workspace extracted.
func (k *Keeper) load(ctx context.Context, p *parked, o *origin, so Options) (*agentapi.CarriedSession, error) {
	id := p.rec.Session.ID
	f, err := os.Open(p.path(parkState))
	if err != nil {
		return nil, fmt.Errorf("session %s: parked state: %w", id, err)
	}
	st, err := runner.ReadState(bufio.NewReaderSize(f, 1<<20), p.rec.StateBytes, runner.MaxStateBytes, p.rec.NotCarried)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	defer st.Close()
	out, err := k.carry(ctx, o, so, st, func(ws *container.Workspace) error {
		a, err := os.Open(p.path(parkArchive))
		if err != nil {
			return err
		}
		defer a.Close()
		if err := ws.ReadTar(tar.NewReader(bufio.NewReaderSize(a, 1<<20))); err != nil {
			return err
		}
		k.metaLost(ctx, ws, "session", so.ID)
		return nil
	})
	if err != nil {
		return nil, k.core.Classify(err)
	}
	return &out, nil
}

// metaLost logs the files and directories a restored workspace holds
// without their metadata (user.e2b.* xattrs): its filesystem keeps no user
// xattrs (workspace.MetaLost). A tmpfs keeps them since Linux 6.6.
func (k *Keeper) metaLost(ctx context.Context, ws *container.Workspace, attrs ...any) {
	if n := ws.MetaLost(); n > 0 {
		k.log.Warn("workspace restored without some files' metadata: its filesystem keeps no user xattrs",
			append(append(caller.Attrs(ctx), attrs...), "files", n)...)
	}
}

// deleteParked removes a parked session's files.
func (k *Keeper) deleteParked(p *parked) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.gone {
		k.parked.remove(p)
	}
}

// errParked is the error of an operation that needs a live session on a
// parked one.
func errParked(id string) error { return fmt.Errorf("session %s: %w", id, ErrParked) }
