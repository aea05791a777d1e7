package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/agentapi/httpkit"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/daemon"
)

// fakeRunner records specs and runs fn (default: exit 0, stdout "ok\n").
type fakeRunner struct {
	fn    func(ctx context.Context, spec container.Spec) (*container.Result, error)
	mu    sync.Mutex
	specs []container.Spec
}

func (f *fakeRunner) Run(ctx context.Context, spec container.Spec) (*container.Result, error) {
	f.mu.Lock()
	f.specs = append(f.specs, spec)
	f.mu.Unlock()
	if f.fn != nil {
		return f.fn(ctx, spec)
	}
	return &container.Result{ID: spec.ID, Status: container.StatusOK, Stdout: []byte("ok\n"), StdoutBytes: 3}, nil
}

func (f *fakeRunner) lastSpec(t *testing.T) container.Spec {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.specs) == 0 {
		t.Fatal("the runner was never called")
	}
	return f.specs[len(f.specs)-1]
}

// fakeStore knows the rootfs names in dirs and counts acquisitions.
type fakeStore struct {
	dirs  map[string]string
	mu    sync.Mutex
	held  int
	total int // acquisitions ever
}

func (s *fakeStore) Acquire(name string) (string, func(), error) {
	d, ok := s.dirs[name]
	if !ok {
		return "", nil, fmt.Errorf("%q: %w", name, daemon.ErrRootfsNotFound)
	}
	s.mu.Lock()
	s.held++
	s.total++
	s.mu.Unlock()
	return d, func() { s.mu.Lock(); s.held--; s.mu.Unlock() }, nil
}

func (s *fakeStore) List() ([]string, error) {
	var names []string
	for n := range s.dirs {
		names = append(names, n)
	}
	return names, nil
}

func (s *fakeStore) acquired() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

func (s *fakeStore) holding() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

type testServer struct {
	srv    *Server
	core   *daemon.Daemon
	runner *fakeRunner
	store  *fakeStore
	sock   string
	client *client.Client
	http   *http.Client
	logs   *syncBuffer
	stop   func() error // cancels Run and returns its error
}

// testConfig is the core's configuration and the server's own settings.
type testConfig struct {
	daemon.Config
	MaxBodyBytes         int64
	MaxBodyBytesInFlight int64
	BodyTimeout          time.Duration
	WriteTimeout         time.Duration
	ShutdownGrace        time.Duration
	// WrapCore, when set, puts a core of the test's in front of the real one.
	WrapCore func(Core) Core
}

// startServer serves a Server over a real core with a fake runner on a
// temp Unix socket.
func startServer(t *testing.T, runner *fakeRunner, mod func(*testConfig)) *testServer {
	t.Helper()
	if runner == nil {
		runner = &fakeRunner{}
	}
	store := &fakeStore{dirs: map[string]string{"default": t.TempDir(), "other": t.TempDir()}}
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := testConfig{Config: daemon.Config{
		Engine:        runner,
		Rootfs:        store,
		Logger:        log,
		MaxConcurrent: 2,
		Version:       "test",
		CgroupMode:    "v2",
	}}
	if mod != nil {
		mod(&cfg)
	}
	core, err := daemon.New(cfg.Config)
	if err != nil {
		t.Fatal(err)
	}
	var served Core = core
	if cfg.WrapCore != nil {
		served = cfg.WrapCore(core)
	}
	srv, err := New(Config{Core: served, Logger: log, ShutdownGrace: cfg.ShutdownGrace, Limits: httpkit.Limits{
		MaxBodyBytes: cfg.MaxBodyBytes, MaxBodyBytesInFlight: cfg.MaxBodyBytesInFlight, BodyTimeout: cfg.BodyTimeout,
		WriteTimeout: cfg.WriteTimeout}})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() { cancel(); runErr = <-done; core.Close() })
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	var d net.Dialer
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "unix", sock)
	}}}
	return &testServer{srv: srv, core: core, runner: runner, store: store, sock: sock, client: &client.Client{Socket: sock},
		http: hc, logs: logs, stop: stop}
}

// blockingRunner returns a runner whose runs signal started and then wait
// for release (or their ctx, answering "killed").
func blockingRunner() (r *fakeRunner, started chan string, release chan struct{}) {
	started = make(chan string, 100)
	release = make(chan struct{})
	r = &fakeRunner{fn: func(ctx context.Context, spec container.Spec) (*container.Result, error) {
		started <- spec.ID
		select {
		case <-release:
			return &container.Result{ID: spec.ID, Status: container.StatusOK}, nil
		case <-ctx.Done():
			return &container.Result{ID: spec.ID, Status: container.StatusKilled, Signal: "SIGKILL", ExitCode: -1}, nil
		}
	}}
	return r, started, release
}

var errSetup = errors.New("clone: operation not permitted")

// queued is the number of runs waiting for a slot.
func queued(ts *testServer) int {
	info, err := ts.core.Info(context.Background())
	if err != nil {
		panic(err)
	}
	return info.Queued
}
