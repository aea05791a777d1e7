package daemon

import (
	"context"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/daemon/egress"
	"github.com/nsbox/nsbox/daemon/policy"
	"github.com/nsbox/nsbox/daemon/sessions"
)

// The session types and errors as the core's callers name them.
type (
	SessionOptions = sessions.Options
	ForkOptions    = sessions.ForkOptions
	SessionStats   = sessions.Stats
)

// ErrNoSessions: the daemon has no Starter, so it cannot keep sandboxes.
var ErrNoSessions = sessions.ErrNoSessions

// Exec runs a cell in a session; opts.OnStdout/OnStderr stream its output
// and opts.OnResult is called with the result, as for Run.
func (d *Daemon) Exec(ctx context.Context, id string, req *agentapi.ExecRequest, opts RunOptions) (*agentapi.RunResult, error) {
	return d.Keeper.Exec(ctx, id, req, sessions.ExecOptions{OnStart: opts.OnStart, OnStdout: opts.OnStdout, OnStderr: opts.OnStderr, OnResult: opts.OnResult})
}

// sessionCore is the core as the sessions see it (sessions.Core): a type
// of its own, so that *Daemon's methods stay those of its callers.
type sessionCore struct{ d *Daemon }

func (c sessionCore) Admit() error          { return c.d.admit() }
func (c sessionCore) Policy() *policy.Rules { return c.d.pol.Load() }

func (c sessionCore) AcquireRootfs(name string) (string, func(), error) {
	return c.d.acquireRootfs(name)
}

func (c sessionCore) Mounts(ctx context.Context, vols []agentapi.VolumeMount, datasets []string, then func()) ([]container.Mount, func(), error) {
	return c.d.mounts(ctx, vols, datasets, then)
}

func (c sessionCore) StartEgress(spec *container.Spec, p *egress.Policy) (func(), error) {
	nr, err := c.d.startEgress(spec, p)
	if nr == nil || err != nil {
		return nil, err
	}
	return func() { c.d.takeEgress(nr, true) }, nil
}

func (c sessionCore) EgressReport(id string) *agentapi.NetworkReport {
	if nr := c.d.egressRun(id); nr != nil {
		return c.d.takeEgress(nr, false)
	}
	return nil
}

func (c sessionCore) Network(id string) *agentapi.Network {
	if nr := c.d.egressRun(id); nr != nil {
		return nr.wire
	}
	return nil
}

func (sessionCore) Classify(err error) error { return classify(err) }
