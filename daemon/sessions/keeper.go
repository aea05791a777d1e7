// Package sessions keeps the daemon's sessions: long-lived sandboxes
// whose interpreter keeps its state between execs, with their files,
// pause and resume, fork, and park and revive through the park store, the
// sessions written to disk (parkstore.go). The core (package daemon) is
// its client and host, as tailscale's LocalBackend is its extensions'
// (ipn/ipnlocal/extension_host.go): it embeds the Keeper, so that the
// transports' Core interfaces see the session methods on *daemon.Daemon,
// and gives it what sessions need of the rest of the daemon through Core.
package sessions

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/clock"
	"github.com/nsbox/nsbox/container/runner"
	"github.com/nsbox/nsbox/container/session"
	"github.com/nsbox/nsbox/daemon/caller"
	"github.com/nsbox/nsbox/daemon/egress"
	"github.com/nsbox/nsbox/daemon/policy"
	"github.com/nsbox/nsbox/daemon/ports"
)

// Core is what the sessions need of the daemon's core.
type Core interface {
	// Admit refuses work once the daemon's Close has begun.
	Admit() error
	// Policy is the policy requests see now (Reconfigure replaces it).
	Policy() *policy.Rules
	// AcquireRootfs resolves a rootfs name; release is called once the
	// sandbox is gone.
	AcquireRootfs(name string) (dir string, release func(), err error)
	// Mounts resolves a request's volumes and datasets; the release it
	// returns frees them, then calls then.
	Mounts(ctx context.Context, vols []agentapi.VolumeMount, datasets []string, then func()) ([]container.Mount, func(), error)
	// StartEgress gives spec a proxy for network policy p; end (nil when
	// p is nil) stops it once the sandbox is gone.
	StartEgress(spec *container.Spec, p *egress.Policy) (end func(), err error)
	// EgressReport takes what id's proxy recorded since the last take
	// (nil: id has none).
	EgressReport(id string) *agentapi.NetworkReport
	// Network describes id's network policy (nil: none).
	Network(id string) *agentapi.Network
	// Classify gives the engine's, the session manager's, the runners'
	// and the volume store's errors their class (errdefs).
	Classify(err error) error
}

// Config configures a Keeper. Core is required.
type Config struct {
	Core Core
	// Starter starts the sessions' sandboxes; nil: sessions are refused
	// (ErrNoSessions).
	Starter runner.Starter
	Logger  *slog.Logger
	// Clock times lifetimes, idle timeouts and park retention.
	Clock clock.Clock
	// ParkDir, when set, holds parked sessions (park.go): made 0700, and
	// the sessions parked there are loaded by New. Empty: no parking.
	ParkDir string
	// Take hands a new session a warm runner, or nil (session.Config.Take).
	Take func(session.Options) *runner.Runner
	// OnEnd and OnExec are the metrics' hooks: a session ended with st,
	// an exec finished with status.
	OnEnd  func(st runner.Status)
	OnExec func(status string)
	// OnPortConn and OnPortBytes are the metrics' hooks of the sessions'
	// port connections (ports.Book).
	OnPortConn  func()
	OnPortBytes func(sent, received int64)
}

// ExecOptions are what a transport adds to an exec: where live output
// goes, as the daemon's RunOptions carry it for a run.
type ExecOptions struct {
	// OnStart is called with the session's id once the session is found
	// (revived if it was parked), before the cell is sent.
	OnStart func(id string)
	// OnStdout and OnStderr receive output live.
	OnStdout, OnStderr func([]byte)
	// OnResult is called once with the result when Exec succeeds.
	OnResult func(*agentapi.RunResult)
}

// Keeper keeps the sessions, live and parked.
type Keeper struct {
	core   Core
	log    *slog.Logger
	clock  clock.Clock
	onExec func(status string)

	mgr    *session.Manager // nil without a Starter
	parked *parkStore       // nil without a ParkDir or sessions
	snaps  *parkStore       // the snapshots (snapshots.go), beside parked
	ports  *ports.Book      // the connections to the sessions' ports (ports.go)
}

// New returns a Keeper; with a ParkDir it loads the sessions parked there.
func New(cfg Config) (*Keeper, error) {
	k := &Keeper{core: cfg.Core, log: cfg.Logger, clock: clock.Or(cfg.Clock), onExec: cfg.OnExec,
		ports: &ports.Book{OnConn: cfg.OnPortConn, OnBytes: cfg.OnPortBytes}}
	if k.log == nil {
		k.log = slog.New(slog.DiscardHandler)
	}
	if k.onExec == nil {
		k.onExec = func(string) {}
	}
	if cfg.Starter == nil {
		return k, nil
	}
	pol := k.core.Policy()
	k.mgr = session.New(session.Config{
		Starter:            cfg.Starter,
		Logger:             k.log,
		MaxSessions:        pol.Sessions.Max,
		MaxLifetime:        pol.Sessions.MaxLifetime,
		DefaultIdleTimeout: pol.Sessions.IdleTimeout,
		OnEnd:              cfg.OnEnd,
		Take:               cfg.Take,
		Park:               k.parkIdle,
		Clock:              k.clock,
	})
	if cfg.ParkDir != "" {
		var err error
		if k.parked, err = openParkStore(cfg.ParkDir, k.log.With("component", "park"), k.clock); err != nil {
			return nil, err
		}
		if k.snaps, err = openParkStore(filepath.Join(filepath.Dir(cfg.ParkDir), "snapshots"), k.log.With("component", "snapshots"), k.clock); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// mayUse reports whether ctx's caller may see and use a session of owner,
// under the policy's admin group.
func (k *Keeper) mayUse(ctx context.Context, owner int64) bool {
	return caller.MayUse(ctx, owner, k.core.Policy().Sessions.AdminGID)
}

// Manager is the live sessions' manager, for the metrics (nil without a
// Starter).
func (k *Keeper) Manager() *session.Manager { return k.mgr }

// Reconfigure applies pol's session limits to the sessions from now on;
// live sessions keep their idle timeout.
func (k *Keeper) Reconfigure(pol *policy.Rules) {
	if k.mgr != nil {
		k.mgr.SetLimits(pol.Sessions.Max, pol.Sessions.IdleTimeout, pol.Sessions.MaxLifetime)
	}
}

// Close ends every live session; parked ones stay on disk for the next
// daemon.
func (k *Keeper) Close() {
	if k.mgr != nil {
		k.log.Info("ending sessions", "live", k.mgr.Live())
		k.mgr.Close()
	}
	if k.parked != nil {
		k.parked.close()
		k.snaps.close()
	}
}
