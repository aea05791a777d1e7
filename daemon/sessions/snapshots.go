package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/runner"
	"github.com/nsbox/nsbox/daemon/caller"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// Snapshot errors.
var (
	// ErrSnapshotNotFound: no snapshot of that id that the caller may use.
	ErrSnapshotNotFound = errdefs.New(errdefs.ErrNotFound, "no such snapshot (it may have been deleted or outlived [sessions] park_retention)")
	// ErrSnapshotsFull: the snapshot would take parked sessions and
	// snapshots past [sessions] park_max_bytes.
	ErrSnapshotsFull = errdefs.New(errdefs.ErrNoSpace, "no room for the snapshot; the session runs on unharmed: delete snapshots or parked sessions, or raise [sessions] park_max_bytes")
)

// SnapshotOptions are a snapshot's id (1 to 64 of a-z, 0-9 and -, unused
// by any snapshot; empty: the daemon makes one) and its transport's record of it (at most MaxMetaBytes).
type SnapshotOptions struct {
	ID   string
	Meta json.RawMessage
}

// Snapshot describes a snapshot: a live session's state (its Python state
// and workspace, as a park writes them) kept under an id of its own while
// the session runs on, the starting point of any number of new sessions: a
// park record in a second park store, <state_dir>/snapshots/ beside
// <state_dir>/sessions/: never listed as a session, never revived in
// place, removed only by DeleteSnapshot or at [sessions] park_retention.
// Parked sessions and snapshots share [sessions] park_max_bytes.
type Snapshot struct {
	ID string
	// Of is the session it was taken of.
	Of        string
	CreatedAt time.Time
	// Bytes is what it holds on disk (state and workspace archive).
	Bytes int64
	Meta  json.RawMessage
}

func (p *parked) snapshot() Snapshot {
	return Snapshot{ID: p.rec.Session.ID, Of: p.rec.Of, CreatedAt: p.rec.ParkedAt, Bytes: p.bytes(), Meta: p.rec.Meta}
}

// SnapshotSession keeps session id's state as snapshot so.ID, owned by
// the session's owner; the session is captured as a fork captures it and
// runs on. Past [sessions] park_max_bytes it fails (ErrSnapshotsFull).
func (k *Keeper) SnapshotSession(ctx context.Context, id string, so SnapshotOptions) (*Snapshot, error) {
	if k.snaps == nil {
		return nil, ErrNoPark
	}
	if so.ID == "" {
		so.ID = container.NewID()
	}
	if !validSnapshotID(so.ID) {
		return nil, errdefs.Field("id", "snapshot id %q: 1 to 64 of a-z, 0-9 and -", so.ID)
	}
	m, err := checkMeta(so.Meta)
	if err != nil {
		return nil, err
	}
	if err := k.core.Admit(); err != nil {
		return nil, err
	}
	sess, o, err := k.carriable(ctx, id)
	if err != nil {
		return nil, err
	}
	info := sess.Info()
	var out Snapshot
	err = sess.Capture(ctx, stateCap(info.Limits), func(st *runner.State, ws *container.Workspace) error {
		now := k.clock.Now()
		wire := k.wireSession(info)
		wire.ID = so.ID
		rec := parkRecord{Version: parkVersion, Session: wire, Origin: *o, Owner: info.Owner, Of: id,
			ParkedAt: now, Expires: now.Add(k.core.Policy().Sessions.ParkRetention), LifetimeLeftMs: max(info.Lifetime.Milliseconds(), 1),
			NotCarried: st.NotCarried, Meta: m}
		p, err := k.snaps.write(rec, st, ws, k.core.Policy().Sessions.ParkMaxBytes-k.parked.usedNow())
		if err != nil {
			return err
		}
		p.mu.Unlock()
		out = p.snapshot()
		return nil
	})
	if errors.Is(err, ErrParkFull) {
		return nil, fmt.Errorf("snapshot of %s: %w (%v)", id, ErrSnapshotsFull, err)
	}
	if err != nil {
		return nil, k.core.Classify(err)
	}
	k.log.Info("session snapshot taken", append(caller.Attrs(ctx), "session", id, "snapshot", so.ID, "bytes", out.Bytes)...)
	return &out, nil
}

// validSnapshotID: the id names the snapshot's directory.
func validSnapshotID(id string) bool {
	return id != "" && len(id) <= 64 && strings.Trim(id, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
}

// Snapshots lists the snapshots the caller may use, oldest first.
func (k *Keeper) Snapshots(ctx context.Context) []Snapshot {
	out := []Snapshot{}
	if k.snaps == nil {
		return out
	}
	for _, p := range k.snaps.list() {
		if k.mayUse(ctx, p.rec.Owner) {
			out = append(out, p.snapshot())
		}
	}
	return out
}

// snapshotFor is snapshot id if the caller may use it.
func (k *Keeper) snapshotFor(ctx context.Context, id string) (*parked, error) {
	var p *parked
	if k.snaps != nil {
		p = k.snaps.get(id)
	}
	if p == nil || !k.mayUse(ctx, p.rec.Owner) {
		return nil, fmt.Errorf("snapshot %q: %w", id, ErrSnapshotNotFound)
	}
	return p, nil
}

// DeleteSnapshot removes snapshot id and its files.
func (k *Keeper) DeleteSnapshot(ctx context.Context, id string) error {
	p, err := k.snapshotFor(ctx, id)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone {
		return fmt.Errorf("snapshot %q: %w", id, ErrSnapshotNotFound)
	}
	k.snaps.remove(p)
	k.log.Info("session snapshot deleted", append(caller.Attrs(ctx), "snapshot", id)...)
	return nil
}

// FromSnapshotOptions are what a transport sets of a session started
// from a snapshot: as Options.ID and Options.Meta, its lifetime and
// lifetime action instead of the snapshot's session's, and Env, added to
// its environment.
type FromSnapshotOptions struct {
	ID             string
	Meta           json.RawMessage
	Lifetime       time.Duration
	LifetimeAction string
	Env            map[string]string
}

// StartFromSnapshot makes a new session from snapshot id: its state
// restored and its workspace extracted in a fresh sandbox, as a revive
// does, owned by the snapshot's owner; the snapshot stays.
func (k *Keeper) StartFromSnapshot(ctx context.Context, id string, fo FromSnapshotOptions) (*agentapi.CarriedSession, error) {
	if err := k.core.Policy().CheckLifetime(fo.Lifetime.Milliseconds()); err != nil {
		return nil, err
	}
	if err := k.core.Admit(); err != nil {
		return nil, err
	}
	p, err := k.snapshotFor(ctx, id)
	if err != nil {
		return nil, err
	}
	p.mu.RLock() // a delete waits for the files to be read; other starts do not
	defer p.mu.RUnlock()
	if p.gone {
		return nil, fmt.Errorf("snapshot %q: %w", id, ErrSnapshotNotFound)
	}
	o := p.rec.Origin
	if fo.Lifetime > 0 {
		o.Request.LifetimeMs = fo.Lifetime.Milliseconds()
	}
	if fo.LifetimeAction != "" {
		o.Request.LifetimeAction = fo.LifetimeAction
	}
	if len(fo.Env) > 0 { // the record's map stays as it is
		env := maps.Clone(o.Request.Env)
		if env == nil {
			env = map[string]string{}
		}
		maps.Copy(env, fo.Env)
		o.Request.Env = env
	}
	owner := p.rec.Owner
	out, err := k.load(ctx, p, &o, Options{ID: fo.ID, Processes: o.Processes, NoIdleEnd: o.NoIdleEnd, Home: o.Home, Meta: fo.Meta, owner: &owner})
	if err != nil {
		return nil, err
	}
	k.log.Info("session started from a snapshot", append(caller.Attrs(ctx), "session", out.ID, "snapshot", id)...)
	return out, nil
}
