package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/runner"
	"github.com/nsbox/nsbox/container/session"
	"github.com/nsbox/nsbox/daemon/caller"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/lang"
)

// ErrTooManyBranches: a fork needs more session slots than are free.
var ErrTooManyBranches = errdefs.New(errdefs.ErrExhausted, "not enough free session slots for the fork; delete or park sessions, fork fewer branches, or raise [sessions] max")

// ForkSession makes count new sessions (1 to agentapi.MaxForkCount; nil:
// 1) that each start with the parent's Python state and a copy of its
// workspace, in fresh sandboxes made as any session's are, owned by the
// parent's owner. The parent must be idle or paused (a paused one is
// thawed for the snapshot and paused again); it is unharmed whatever
// happens. If any branch fails, those made are deleted. The state goes
// from the parent's sandbox to the branches' as an opaque blob: the
// daemon never unpickles it.
func (k *Keeper) ForkSession(ctx context.Context, id string, count *int) (*agentapi.ForkResult, error) {
	n := 1
	if count != nil {
		n = *count
	}
	return k.ForkSessionWith(ctx, id, ForkOptions{Count: n})
}

// ForkOptions are what a transport may set of a fork beyond its count.
type ForkOptions struct {
	Count int
	// IDs, when set, are the branches' ids (one per branch, each a valid
	// session id): E2B's 128-bit sandbox ids. Else the daemon makes them.
	IDs []string
	// Lifetime, when set, is the branches' lifetime instead of the
	// parent's request's.
	Lifetime time.Duration
	// Meta, when set, are the branches' Options.Meta (one per branch).
	// Else a branch has none: the parent's is its transport's record of
	// the parent (E2B's tokens), which a branch must not inherit.
	Meta []json.RawMessage
}

// ForkSessionWith is ForkSession with ForkOptions.
func (k *Keeper) ForkSessionWith(ctx context.Context, id string, fo ForkOptions) (*agentapi.ForkResult, error) {
	n := fo.Count
	if n < 1 || n > agentapi.MaxForkCount {
		return nil, errdefs.Field("count", "%d is outside 1 to %d", n, agentapi.MaxForkCount)
	}
	if fo.IDs != nil && len(fo.IDs) != n {
		return nil, fmt.Errorf("fork of %s: %d ids for %d branches", id, len(fo.IDs), n)
	}
	if fo.Meta != nil && len(fo.Meta) != n {
		return nil, fmt.Errorf("fork of %s: %d metas for %d branches", id, len(fo.Meta), n)
	}
	// Checked before the parent's state is taken, as each branch's
	// creation would check it after.
	if err := k.core.Policy().CheckLifetime(fo.Lifetime.Milliseconds()); err != nil {
		return nil, err
	}
	if err := k.core.Admit(); err != nil {
		return nil, err
	}
	parent, o, err := k.carriable(ctx, id)
	if err != nil {
		return nil, err
	}
	if live, mx := k.mgr.Live(), k.core.Policy().Sessions.Max; live+n > mx {
		return nil, fmt.Errorf("fork of %s into %d: %d of %d sessions are live: %w", id, n, live, mx, ErrTooManyBranches)
	}
	info := parent.Info()
	out := &agentapi.ForkResult{}
	start := time.Now()
	var snapshot time.Duration
	var size int64
	err = parent.Capture(ctx, stateCap(info.Limits), func(st *runner.State, ws *container.Workspace) error {
		snapshot, size = time.Since(start), st.Size()
		bo := *o
		if fo.Lifetime > 0 {
			bo.Request.LifetimeMs = fo.Lifetime.Milliseconds()
		}
		branches, err := k.branch(ctx, &bo, info.Owner, n, &fo, st, ws)
		out.Sessions = branches
		return err
	})
	if err != nil {
		return nil, k.core.Classify(err)
	}
	k.log.Info("session forked", append(caller.Attrs(ctx), "session", id, "branches", n, "state_bytes", size,
		"snapshot", snapshot, "duration", time.Since(start))...)
	return out, nil
}

// carriable resolves a session whose state a fork or park can carry.
func (k *Keeper) carriable(ctx context.Context, id string) (*session.Session, *origin, error) {
	sess, err := k.session(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	o, _ := sess.Options().Origin.(*origin)
	if o == nil {
		return nil, nil, fmt.Errorf("session %s: %w", id, ErrNotCarriable)
	}
	if l, ok := lang.Builtin(o.Request.Language); o.Request.Language != "" && (!ok || !l.Carriable()) {
		return nil, nil, errdefs.Field("language", "%q: fork and park are for Python sessions", o.Request.Language)
	}
	return sess, o, nil
}

// stateCap is the largest state a session may carry: its memory limit, at
// most runner.MaxStateBytes.
func stateCap(l container.Limits) int64 {
	if l.MemoryBytes > 0 && l.MemoryBytes < runner.MaxStateBytes {
		return l.MemoryBytes
	}
	return runner.MaxStateBytes
}

// branch makes n sessions from o, concurrently, each loaded with st and a
// copy of ws, with fo's ids and metas when given. On any error the ones
// made are deleted.
func (k *Keeper) branch(ctx context.Context, o *origin, uid int64, n int, fo *ForkOptions, st *runner.State, ws *container.Workspace) ([]agentapi.CarriedSession, error) {
	out := make([]agentapi.CarriedSession, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			so := Options{Processes: o.Processes, NoIdleEnd: o.NoIdleEnd, Home: o.Home, owner: &uid}
			if fo.IDs != nil {
				so.ID = fo.IDs[i]
			}
			if fo.Meta != nil {
				so.Meta = fo.Meta[i]
			}
			out[i], errs[i] = k.carry(ctx, o, so, st, func(dst *container.Workspace) error {
				if err := ws.CopyTo(dst.Workspace); err != nil {
					return err
				}
				k.metaLost(ctx, dst, "fork_branch", i)
				return nil
			})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, b := range out {
			if b.ID != "" {
				_ = k.mgr.Delete(b.ID)
			}
		}
		return nil, err
	}
	return out, nil
}

// carry creates a session from o and loads it: files fill its workspace,
// then st its interpreter. On error the session is deleted.
func (k *Keeper) carry(ctx context.Context, o *origin, so Options, st *runner.State, files func(*container.Workspace) error) (agentapi.CarriedSession, error) {
	req := o.Request
	s, err := k.CreateSessionWith(ctx, &req, so)
	if err != nil {
		return agentapi.CarriedSession{}, err
	}
	sess, err := k.mgr.Get(s.ID)
	var failed []runner.NotCarried
	if err == nil {
		failed, err = sess.Load(ctx, st, files)
	}
	if err != nil {
		_ = k.mgr.Delete(s.ID)
		return agentapi.CarriedSession{}, err
	}
	return agentapi.CarriedSession{Session: k.wireSession(sess.Info()), NotCarried: wireNotCarried(st.NotCarried, failed)}, nil
}

func wireNotCarried(lists ...[]runner.NotCarried) []agentapi.NotCarried {
	out := []agentapi.NotCarried{}
	for _, l := range lists {
		for _, n := range l {
			out = append(out, agentapi.NotCarried{Name: n.Name, Context: n.Context, Reason: n.Reason})
		}
	}
	return out
}
