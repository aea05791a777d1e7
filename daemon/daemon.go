package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/admission"
	"github.com/nsbox/nsbox/daemon/egress"
	"github.com/nsbox/nsbox/daemon/guests"
	"github.com/nsbox/nsbox/daemon/metrics"
	"github.com/nsbox/nsbox/daemon/policy"
	"github.com/nsbox/nsbox/daemon/sessions"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/clock"
	"github.com/nsbox/nsbox/container/runner"
)

// Engine runs one sandbox to its end (an argv run, or code as its
// language's one-shot program); *container.Engine and *zygote.Set
// implement it. (A runner, container/runner, is an interpreter serving
// cells in a sandbox the Starter started.)
type Engine interface {
	Run(ctx context.Context, spec container.Spec) (*container.Result, error)
}

// RootfsStore resolves rootfs names. Acquire returns the rootfs directory and
// a release func the core calls once the sandbox is gone; an unknown name is
// an error wrapping ErrRootfsNotFound.
type RootfsStore interface {
	Acquire(name string) (dir string, release func(), err error)
	List() ([]string, error)
}

// Config configures a Daemon. Engine and Rootfs are required.
type Config struct {
	Engine Engine
	// Starter starts long-lived sandboxes: runs of a language with a
	// runner kind (daemon/lang) go through a runner on one, and sessions
	// need it. *container.Engine and *zygote.Set implement it. Nil: code
	// runs as its language's one-shot program (`python3 -c`) and sessions
	// are refused.
	Starter runner.Starter
	Rootfs  RootfsStore
	Logger  *slog.Logger // nil discards

	// MaxConcurrent runs execute at once (default runtime.NumCPU()); up to
	// QueueSize more wait for a slot (default 2*MaxConcurrent; 0 with
	// NoQueue); beyond that Run fails with ErrBusy.
	MaxConcurrent int
	QueueSize     int
	NoQueue       bool
	// ResultBytes bounds the run results held at once, counted as each
	// run's output caps (twice output_bytes) from its start to its answer
	// (default DefaultResultBytes): a run that does not fit waits, holding
	// its slot, for answers to be written.
	ResultBytes int64

	// Policy is what Reconfigure may change later.
	Policy policy.Policy

	Version    string            // daemon version, reported by Info
	CgroupMode string            // "v2", "v1" or "hybrid", reported by Info
	Landlock   agentapi.Landlock // the engine's, reported by Info

	// Pool, when set, hands out warm Python runners to matching Python
	// runs and new sessions; the rest start on the Starter.
	Pool Pool
	// Zygotes, when set, are reported by Info and the metrics (the
	// Starter routes runs to them).
	Zygotes Zygotes
	// Egress, when set, is the egress proxy's settings: runs with a
	// network policy get a proxy in their sandbox (network.go).
	Egress *egress.Options
	// ParkDir, when set, holds parked sessions (daemon/sessions): made
	// 0700, and the sessions parked there are loaded by New. Empty: no
	// parking.
	ParkDir string
	// Volumes, when set, is the store of named volumes (volumes.go); nil
	// refuses requests naming one.
	Volumes Volumes
	// Datasets are the operator's read-only host datasets, by name.
	Datasets []Dataset
	// Clock times session lifetimes, idle timeouts and park retention
	// (nil: the real clock; tests move a fake one).
	Clock clock.Clock
}

// DefaultResultBytes is Config.ResultBytes's default: two of the largest
// run answers (two 64 MiB outputs, the top of output_bytes). At 128 MiB
// three never-reading clients of 2 × 16 MiB answers (caps 64 MiB) went
// one at a time, each waiting out the last one's write deadline; at 256
// MiB four clients of 2 × 64 MiB results peak at 409 MiB of RSS.
const DefaultResultBytes = 256 << 20

// Daemon is the transport-independent core: it admits, validates and runs
// runs, keeps sessions, and reports its state. The HTTP server (and any
// other way in) only translates requests and answers.
type Daemon struct {
	cfg     Config
	log     *slog.Logger
	adm     *admission.Gate
	results *admission.Results
	metrics *metrics.Metrics
	// pol holds the defaults, maxima, profiles and session settings that
	// requests see; Reconfigure replaces it.
	pol atomic.Pointer[policy.Rules]

	// Keeper keeps the sessions (package sessions); its methods are the
	// core's session methods.
	*sessions.Keeper
	// guests are the sessions' guest interpreters (GuestExec).
	guests guests.Set

	closed  atomic.Bool
	closing sync.WaitGroup // sandboxes tearing down after their answer
	// teardown tokens: a finished run's teardown that holds one has freed
	// its run slot; at most MaxConcurrent at once, so live sandboxes stay
	// bounded. tearing counts them for Info.
	teardowns chan struct{}
	tearing   atomic.Int64

	egressOpts *egress.Options // nil: no network
	egressMu   sync.Mutex
	egressRuns map[string]*netRun // by run or session id
}

// New checks cfg and returns a Daemon.
func New(cfg Config) (*Daemon, error) {
	if cfg.Engine == nil || cfg.Rootfs == nil {
		return nil, errors.New("daemon: Config.Engine and Config.Rootfs are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = runtime.NumCPU()
	}
	if cfg.ResultBytes <= 0 {
		cfg.ResultBytes = DefaultResultBytes
	}
	if cfg.QueueSize <= 0 && !cfg.NoQueue {
		cfg.QueueSize = 2 * cfg.MaxConcurrent
	}
	d := &Daemon{
		cfg:       cfg,
		log:       cfg.Logger,
		adm:       admission.New(cfg.MaxConcurrent, cfg.QueueSize, cfg.Clock),
		results:   admission.NewResults(cfg.ResultBytes),
		teardowns: make(chan struct{}, cfg.MaxConcurrent),
	}
	d.metrics = metrics.New(cfg.Version, d.adm)
	pol, err := policy.New(cfg.Policy)
	if err != nil {
		return nil, err
	}
	pol.RootfsDir = d.rootfsDir
	d.pol.Store(pol)
	d.egressRuns = map[string]*netRun{}
	if cfg.Egress != nil {
		o := *cfg.Egress
		o.OnRecord = d.onEgressRecord
		d.egressOpts = &o
	}
	if cfg.Pool != nil {
		d.metrics.AddPool(cfg.Pool)
	}
	if cfg.Zygotes != nil {
		d.metrics.AddZygotes(cfg.Zygotes)
	}
	d.Keeper, err = sessions.New(sessions.Config{
		Core:    sessionCore{d},
		Starter: cfg.Starter,
		Logger:  d.log,
		Clock:   cfg.Clock,
		ParkDir: cfg.ParkDir,
		Take:    d.takeForSession,
		OnEnd:   func(st runner.Status) { d.metrics.SessionEnded(string(st)) },
		OnExec:  d.metrics.SessionExec,

		OnPortConn: d.metrics.PortConn, OnPortBytes: d.metrics.PortBytes,
	})
	if err != nil {
		return nil, err
	}
	if mgr := d.Manager(); mgr != nil {
		d.metrics.AddSessions(mgr)
	}
	return d, nil
}

// Reconfigure checks p and makes it apply to the requests that arrive from
// now on; runs already admitted keep their limits and live sessions their
// idle timeout. On error nothing changes.
func (d *Daemon) Reconfigure(p policy.Policy) error {
	pol, err := policy.New(p)
	if err != nil {
		return err
	}
	pol.RootfsDir = d.rootfsDir
	d.pol.Store(pol)
	d.Keeper.Reconfigure(pol)
	return nil
}

// Saturated reports that live runs hold every run slot: the warm pool
// does not refill cold then, so that an interpreter's start never takes
// CPU from them (refills a ready zygote forks go on: they cost what a run
// forked on request would).
func (d *Daemon) Saturated() bool { return d.adm.InFlight() >= d.cfg.MaxConcurrent }

// InFlight is the number of runs holding a run slot.
func (d *Daemon) InFlight() int { return d.adm.InFlight() }

// Metrics is the daemon's Prometheus registry, for a transport to serve.
func (d *Daemon) Metrics() prometheus.Gatherer { return d.metrics.Gatherer() }

// Drain starts no more runs: the runs waiting for a slot, and every run
// (a batch's too) asked for from now on, fail with ErrShuttingDown (503
// with Retry-After); the runs holding a slot go on to their end. A
// transport calls it when it begins to drain, so that its grace is spent
// on the runs in flight only.
func (d *Daemon) Drain() { d.adm.Drain() }

// Close refuses new work, waits for the sandboxes still tearing down after
// their answer, then ends every session. Callers stop their transports
// (and so the runs in flight) first.
func (d *Daemon) Close() {
	d.closed.Store(true)
	d.adm.Drain()
	d.closing.Wait()
	d.Keeper.Close()
}

// admit refuses work once Close has begun.
func (d *Daemon) admit() error {
	if d.closed.Load() {
		return ErrShuttingDown
	}
	return nil
}

// acquireRootfs resolves a rootfs name.
func (d *Daemon) acquireRootfs(name string) (string, func(), error) {
	dir, release, err := d.cfg.Rootfs.Acquire(name)
	if err != nil {
		return "", nil, fmt.Errorf("rootfs %q: %w", name, err)
	}
	return dir, release, nil
}
