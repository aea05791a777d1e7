package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/session"
)

// Runner runs one sandbox; *container.Engine implements it.
type Runner interface {
	Run(ctx context.Context, spec container.Spec) (*container.Result, error)
}

// RootfsStore resolves rootfs names. Acquire returns the rootfs directory and
// a release func the server calls when the run is over; an unknown name is
// an error wrapping ErrRootfsNotFound.
type RootfsStore interface {
	Acquire(name string) (dir string, release func(), err error)
	List() ([]string, error)
}

// Config configures a Server. Runner and Rootfs are required.
type Config struct {
	Runner Runner
	Rootfs RootfsStore
	Logger *slog.Logger // nil discards

	// MaxConcurrent runs execute at once (default runtime.NumCPU()); up to
	// QueueSize more wait for a slot (default 2*MaxConcurrent; 0 with
	// NoQueue); beyond that requests get 429.
	MaxConcurrent int
	QueueSize     int
	NoQueue       bool

	DefaultRootfs string           // default "default"
	DefaultLimits container.Limits // zero fields: container.DefaultLimits()
	MaxLimits     container.Limits // zero fields: DefaultMaxLimits()
	MaxBodyBytes  int64            // default 64 MiB
	ShutdownGrace time.Duration    // default 30s

	// MaxSessions caps live sessions (default 16); SessionIdleTimeout is
	// the default idle timeout (15m) and SessionMaxLifetime a session's
	// longest life (24h). Sessions need a Runner that is also a
	// runner.Starter (*container.Engine is).
	MaxSessions        int
	SessionIdleTimeout time.Duration
	SessionMaxLifetime time.Duration

	Version    string // daemon version, reported by /v1/info
	CgroupMode string // "v2", "v1" or "hybrid", reported by /v1/info

	// Profiles a run may select by name (nil: agentapi.BuiltinProfiles()).
	Profiles []agentapi.Profile

	// Pool, when set, hands out warm Python runners to matching Python
	// runs and new sessions; the rest start cold.
	Pool Pool

	// Zygotes, when set, reports the zygotes (the Runner routes runs to
	// them) in /v1/info and /metrics.
	Zygotes Zygotes
}

// DefaultMaxLimits are the maxima a request may ask for unless configured.
func DefaultMaxLimits() container.Limits {
	return container.Limits{
		Timeout:     10 * time.Minute,
		MemoryBytes: 8 << 30,
		Pids:        4096,
		CPUs:        float64(runtime.NumCPU()),
		DiskBytes:   8 << 30,
		OutputBytes: 64 << 20,
	}
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = runtime.NumCPU()
	}
	if c.QueueSize <= 0 && !c.NoQueue {
		c.QueueSize = 2 * c.MaxConcurrent
	}
	if c.DefaultRootfs == "" {
		c.DefaultRootfs = "default"
	}
	c.DefaultLimits = c.DefaultLimits.WithDefaults()
	m, d := &c.MaxLimits, DefaultMaxLimits()
	if m.Timeout == 0 {
		m.Timeout = d.Timeout
	}
	if m.MemoryBytes == 0 {
		m.MemoryBytes = d.MemoryBytes
	}
	if m.Pids == 0 {
		m.Pids = d.Pids
	}
	if m.CPUs == 0 {
		m.CPUs = d.CPUs
	}
	if m.DiskBytes == 0 {
		m.DiskBytes = d.DiskBytes
	}
	if m.OutputBytes == 0 {
		m.OutputBytes = d.OutputBytes
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 64 << 20
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 30 * time.Second
	}
	return c
}

// Server serves the API. Create it with New; it serves one listener at a time.
type Server struct {
	cfg      Config
	log      *slog.Logger
	adm      *admission
	metrics  *metrics
	handler  http.Handler
	draining atomic.Bool
	runs     sync.WaitGroup // run handlers in progress
	closing  sync.WaitGroup // runners closing after their run's answer
	// teardown tokens: a finished run's teardown that holds one has freed
	// its run slot; at most MaxConcurrent at once, so live sandboxes stay
	// bounded. tearing counts them for /v1/info.
	teardowns chan struct{}
	tearing   atomic.Int64
	sessions  *session.Manager // nil when the Runner cannot start sandboxes
	sm        *sessionMetrics
	// pol holds the defaults, maxima and profiles requests see; it starts
	// from cfg and Reconfigure replaces it (cfg's copies then go stale).
	pol atomic.Pointer[policy]
}

// New checks cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Runner == nil || cfg.Rootfs == nil {
		return nil, errors.New("server: Config.Runner and Config.Rootfs are required")
	}
	cfg = cfg.withDefaults()
	if cfg.DefaultLimits.Timeout > cfg.MaxLimits.Timeout || cfg.DefaultLimits.MemoryBytes > cfg.MaxLimits.MemoryBytes ||
		cfg.DefaultLimits.Pids > cfg.MaxLimits.Pids || cfg.DefaultLimits.CPUs > cfg.MaxLimits.CPUs ||
		cfg.DefaultLimits.DiskBytes > cfg.MaxLimits.DiskBytes || cfg.DefaultLimits.OutputBytes > cfg.MaxLimits.OutputBytes {
		return nil, fmt.Errorf("server: default limits %+v exceed the maxima %+v; raise the maxima", cfg.DefaultLimits, cfg.MaxLimits)
	}
	s := &Server{
		cfg:       cfg,
		log:       cfg.Logger,
		adm:       newAdmission(cfg.MaxConcurrent, cfg.QueueSize),
		teardowns: make(chan struct{}, cfg.MaxConcurrent),
		metrics:   newMetrics(),
	}
	if err := s.Reconfigure(Policy{DefaultRootfs: cfg.DefaultRootfs, DefaultLimits: cfg.DefaultLimits,
		MaxLimits: cfg.MaxLimits, Profiles: cfg.Profiles}); err != nil {
		return nil, err
	}
	s.metrics.gauges(s.adm)
	if cfg.Pool != nil {
		s.metrics.reg.MustRegister(newPoolCollector(cfg.Pool))
	}
	if cfg.Zygotes != nil {
		s.metrics.reg.MustRegister(newZygoteCollector(cfg.Zygotes))
	}
	s.sm = newSessionMetrics()
	s.newSessions()
	s.handler = s.routes()
	return s, nil
}

// Handler returns the API's http.Handler (used by Run; handy in tests).
func (s *Server) Handler() http.Handler { return s.handler }

// MetricsHandler serves the Prometheus metrics, for an extra TCP listener.
func (s *Server) MetricsHandler() http.Handler { return s.metrics.handler() }

// Run serves ln until ctx is done, then shuts down gracefully: it stops
// accepting, answers new requests on open connections with 503, lets runs in
// flight finish for up to ShutdownGrace, then cancels them (killing their
// sandboxes) and waits for their handlers. It returns nil after a clean
// shutdown. Run closes ln.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	runCtx, cancelRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRuns()
	hs := &http.Server{
		Handler:           s.handler,
		BaseContext:       func(net.Listener) context.Context { return runCtx },
		ConnContext:       withPeerCred,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	ln = limitListener(ln, s.maxConns())

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}

	s.draining.Store(true)
	s.log.Info("shutting down: draining runs", "in_flight", s.adm.inFlight(), "grace", s.cfg.ShutdownGrace)
	graceCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownGrace)
	defer cancel()
	if err := hs.Shutdown(graceCtx); err != nil {
		s.log.Warn("grace period over: cancelling runs", "in_flight", s.adm.inFlight())
		cancelRuns()
		s.runs.Wait()
		hs.Close()
	}
	<-errc
	s.closing.Wait()
	if s.sessions != nil {
		s.log.Info("ending sessions", "live", s.sessions.Live())
		s.sessions.Close()
	}
	s.log.Info("shut down")
	return nil
}

// maxConns bounds the connections served at once: every run slot and queue
// place, plus room for health, info, metrics and fast 429 answers. Further
// connections wait in the kernel's accept backlog.
func (s *Server) maxConns() int {
	return s.cfg.MaxConcurrent + s.cfg.QueueSize + 64
}
