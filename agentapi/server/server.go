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
	"github.com/nsbox/nsbox/agentapi/httpkit"
	"github.com/nsbox/nsbox/daemon"
	"github.com/nsbox/nsbox/daemon/terminal"
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
	OpenTerminal(ctx context.Context, id string, req *agentapi.TerminalRequest) (*terminal.Terminal, error)
	Exec(ctx context.Context, id string, req *agentapi.ExecRequest, opts daemon.RunOptions) (*agentapi.RunResult, error)
	ListFiles(ctx context.Context, id string) (*agentapi.FileList, error)
	WriteFile(ctx context.Context, id, path string, data []byte) error
	ReadFile(ctx context.Context, id, path string, max int64) ([]byte, error)
	RemoveFile(ctx context.Context, id, path string) error
	WatchDir(ctx context.Context, id, dir string, recursive bool) (*daemon.Watch, error)
	// DialPort connects to 127.0.0.1:port in session id's sandbox.
	DialPort(ctx context.Context, id string, port int) (net.Conn, error)
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
	ShutdownGrace time.Duration // default 30s
	// Limits: header, body and connection limits and deadlines
	// (httpkit's defaults: 64 KiB of headers, 64 MiB bodies, 128 MiB of
	// bodies held at once, 30 s to send a body, 1024 connections).
	httpkit.Limits
	// Bodies, when set, is a body budget shared with another listener
	// (the daemon has one for /v1 and E2B together); its limits replace
	// the body fields of Limits. Nil: one of the server's own.
	Bodies *httpkit.Bodies
}

// Server serves the API over HTTP. Create it with New; it serves one
// listener at a time.
type Server struct {
	cfg      Config
	core     Core
	log      *slog.Logger
	handler  http.Handler
	draining atomic.Bool
	stopping chan struct{} // closed when draining starts: watches end then
	stopOnce sync.Once
	runs     sync.WaitGroup // run and exec handlers in progress
	bodies   *httpkit.Bodies
}

// New checks cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Core == nil {
		return nil, errors.New("server: Config.Core is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 30 * time.Second
	}
	cfg.Limits = cfg.Limits.Or()
	if cfg.Bodies == nil {
		cfg.Bodies = httpkit.NewBodies(cfg.Limits)
	}
	bl := cfg.Bodies.Limits()
	cfg.MaxBodyBytes, cfg.MaxBodyBytesInFlight, cfg.BodyTimeout = bl.MaxBodyBytes, bl.MaxBodyBytesInFlight, bl.BodyTimeout
	s := &Server{cfg: cfg, core: cfg.Core, log: cfg.Logger, bodies: cfg.Bodies, stopping: make(chan struct{})}
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
	hs := s.cfg.Server(s.handler, runCtx, s.log)
	hs.ConnContext = withPeerCred
	ln = s.cfg.Listen(ln, hs)

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}

	s.draining.Store(true)
	s.stopOnce.Do(func() { close(s.stopping) })
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
