package sessions

import (
	"context"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/policy"
)

// DropContext forgets a context of a session's interpreter and its
// variables; "" empties the default one. An unknown name is no error.
func (k *Keeper) DropContext(ctx context.Context, id, name string) error {
	if err := policy.ValidContext(name); err != nil {
		return err
	}
	sess, err := k.session(ctx, id)
	if err != nil {
		return err
	}
	return k.core.Classify(sess.DropContext(ctx, name))
}

// Processes is the process agent of a session created with
// Options.Processes: commands run in its sandbox beside the
// interpreter.
func (k *Keeper) Processes(ctx context.Context, id string) (*procs.Agent, error) {
	sess, err := k.session(ctx, id)
	if err != nil {
		return nil, err
	}
	a, err := sess.Procs()
	return a, k.core.Classify(err)
}

// HeldProcesses is Processes for a client that keeps the session in use
// however quiet it is (a terminal: a user at a shell types no execs): the
// session's idle timeout does not pass until release is called.
func (k *Keeper) HeldProcesses(ctx context.Context, id string) (a *procs.Agent, release func(), err error) {
	sess, err := k.session(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if a, err = sess.Procs(); err != nil {
		return nil, nil, k.core.Classify(err)
	}
	return a, sess.Hold(), nil
}

// SetSessionLifetime makes a session end dur from now, idle or not (at
// most the daemon's max_lifetime).
func (k *Keeper) SetSessionLifetime(ctx context.Context, id string, dur time.Duration) (*agentapi.Session, error) {
	if max := k.core.Policy().Sessions.MaxLifetime; dur <= 0 || dur > max {
		return nil, errdefs.Field("lifetime_ms", "%d is outside 1 to %d (the daemon's max_lifetime, [sessions] in the config)", dur.Milliseconds(), max.Milliseconds())
	}
	sess, err := k.session(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := sess.SetLifetime(dur); err != nil {
		return nil, k.core.Classify(err)
	}
	out := k.wireSession(sess.Info())
	return &out, nil
}

// Stats are a session's resource use now.
type Stats struct {
	CPU           time.Duration // CPU time used so far, by everything in the sandbox
	MemoryBytes   int64         // the memory high mark
	Pids          int64         // processes and threads now
	DiskUsedBytes int64         // what the workspace holds
}

// SessionStats reads a session's cgroup and workspace.
func (k *Keeper) SessionStats(ctx context.Context, id string) (*Stats, error) {
	sess, err := k.session(ctx, id)
	if err != nil {
		return nil, err
	}
	st, used, err := sess.Stats()
	if err != nil {
		return nil, k.core.Classify(err)
	}
	return &Stats{CPU: st.CPUUsage, MemoryBytes: st.MemoryPeakBytes, Pids: st.PidsCurrent, DiskUsedBytes: used}, nil
}
