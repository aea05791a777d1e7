package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon"
)

// Core is what the handlers need from the daemon; *daemon.Daemon
// implements it. The handlers decode, call it and encode: every decision
// about a run is the core's.
type Core interface {
	Run(ctx context.Context, req *agentapi.RunRequest, opts daemon.RunOptions) (*agentapi.RunResult, error)
	RunBatch(ctx context.Context, req *agentapi.BatchRequest, opts daemon.BatchOptions) (agentapi.BatchSummary, error)
	CreateSession(ctx context.Context, req *agentapi.SessionRequest) (*agentapi.Session, error)
	Sessions(ctx context.Context) []agentapi.Session
	Session(ctx context.Context, id string) (*agentapi.Session, error)
	DeleteSession(ctx context.Context, id string) error
	PauseSession(ctx context.Context, id string) (*agentapi.Session, error)
	ResumeSession(ctx context.Context, id string) (*agentapi.Session, error)
	ForkSession(ctx context.Context, id string, count *int) (*agentapi.ForkResult, error)
	ParkSession(ctx context.Context, id string) (*agentapi.Session, error)
	ReviveSession(ctx context.Context, id string) (*agentapi.CarriedSession, error)
	Exec(ctx context.Context, id string, req *agentapi.ExecRequest, opts daemon.RunOptions) (*agentapi.RunResult, error)
	ListFiles(ctx context.Context, id string) (*agentapi.FileList, error)
	WriteFile(ctx context.Context, id, path string, data []byte) error
	ReadFile(ctx context.Context, id, path string, max int64) ([]byte, error)
	RemoveFile(ctx context.Context, id, path string) error
	CreateVolume(ctx context.Context, req *agentapi.VolumeRequest) (*agentapi.Volume, error)
	Volumes(ctx context.Context) []agentapi.Volume
	Volume(ctx context.Context, name string) (*agentapi.Volume, error)
	DeleteVolume(ctx context.Context, name string) error
	ListVolumeFiles(ctx context.Context, name string) (*agentapi.FileList, error)
	WriteVolumeFile(ctx context.Context, name, path string, data []byte) error
	ReadVolumeFile(ctx context.Context, name, path string, max int64) ([]byte, error)
	RemoveVolumeFile(ctx context.Context, name, path string) error
	Info(ctx context.Context) (*agentapi.Info, error)
	InFlight() int
	Metrics() prometheus.Gatherer
}

// Config configures a Server. Core is required.
type Config struct {
	Core          Core
	Logger        *slog.Logger  // nil discards
	MaxBodyBytes  int64         // one request body at most (default 64 MiB)
	ShutdownGrace time.Duration // default 30s
	// MaxBodyBytesInFlight bounds the request-body bytes held at once
	// (default 2*MaxBodyBytes); past it requests are refused with 429
	// before their body is read, so that parallel big bodies cannot run
	// the daemon out of memory.
	MaxBodyBytesInFlight int64
	// BodyTimeout is how long a client has to send a request's body
	// (default 30s); a slower one gets 408 and its connection is closed.
	BodyTimeout time.Duration
	// MaxConns bounds the connections served at once (default 1024);
	// further ones wait in the kernel's accept backlog. Idle and slow
	// connections are cheap: the run slots, not this, bound the work.
	MaxConns int
}

// Server serves the API over HTTP. Create it with New; it serves one
// listener at a time.
type Server struct {
	cfg      Config
	core     Core
	log      *slog.Logger
	handler  http.Handler
	draining atomic.Bool
	runs     sync.WaitGroup // run and exec handlers in progress
	bodies   *bodyBudget
}

// New checks cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Core == nil {
		return nil, errors.New("server: Config.Core is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 20
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 30 * time.Second
	}
	if cfg.MaxBodyBytesInFlight <= 0 {
		cfg.MaxBodyBytesInFlight = 2 * cfg.MaxBodyBytes
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = 30 * time.Second
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 1024
	}
	s := &Server{cfg: cfg, core: cfg.Core, log: cfg.Logger, bodies: &bodyBudget{max: cfg.MaxBodyBytesInFlight}}
	s.handler = s.routes()
	return s, nil
}

// Handler returns the API's http.Handler (used by Run; handy in tests).
func (s *Server) Handler() http.Handler { return s.handler }

// MetricsHandler serves the Prometheus metrics, for an extra TCP listener.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.core.Metrics(), promhttp.HandlerOpts{})
}

// Run serves ln until ctx is done, then shuts down gracefully: it stops
// accepting, answers new requests on open connections with 503, lets runs in
// flight finish for up to ShutdownGrace, then cancels them (killing their
// sandboxes) and waits for their handlers. It returns nil after a clean
// shutdown. Run closes ln; the caller closes the core afterwards.
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
	ln = limitListener(ln, s.cfg.MaxConns)

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}

	s.draining.Store(true)
	s.log.Info("shutting down: draining runs", "in_flight", s.core.InFlight(), "grace", s.cfg.ShutdownGrace)
	graceCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownGrace)
	defer cancel()
	if err := hs.Shutdown(graceCtx); err != nil {
		s.log.Warn("grace period over: cancelling runs", "in_flight", s.core.InFlight())
		cancelRuns()
		s.runs.Wait()
		hs.Close()
	}
	<-errc
	s.log.Info("shut down")
	return nil
}
