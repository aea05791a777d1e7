package envd

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/e2b/envd/filesystem/filesystemconnect"
	"github.com/nsbox/nsbox/agentapi/e2b/envd/process/processconnect"
	"github.com/nsbox/nsbox/agentapi/e2b/envd/watchers"
	"github.com/nsbox/nsbox/agentapi/httpkit"
	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/errdefs/errconnect"
)

// Core is what envd's handlers need from the daemon: a session's process
// agent and its workspace's file operations; *daemon.Daemon implements
// it. Processes hands out the agent, whose API (container/procs) is the
// one engine type envd sees.
type Core interface {
	Processes(ctx context.Context, id string) (*procs.Agent, error)

	StatFile(ctx context.Context, id, path string) (*agentapi.WorkspaceFile, error)
	ListDir(ctx context.Context, id, dir string, depth int) ([]agentapi.WorkspaceFile, error)
	MakeDir(ctx context.Context, id, path string) (created bool, err error)
	MoveFile(ctx context.Context, id, from, to string) error
	RemoveAll(ctx context.Context, id, path string) error
	OpenFile(ctx context.Context, id, path string) (*os.File, error)
	WriteFrom(ctx context.Context, id, path string, r io.Reader) (int64, error)
}

// Sandbox is what the handlers know of the sandbox a request is for.
type Sandbox struct {
	ID   string            // its session's id in the core
	Envs map[string]string // the environment it was created with (GET /envs); read only
}

// Config configures the handler. Every field but Stopping is required.
type Config struct {
	Core Core
	// Sandbox returns the sandbox of a request's context. The router in
	// front (agentapi/e2b) has found the sandbox, checked that it runs
	// and that the caller may use it: envd itself authorizes nothing.
	Sandbox func(context.Context) Sandbox
	// MaxUploadBytes and UploadTimeout bound a streamed file upload
	// (POST /files): its size and how long it may take.
	MaxUploadBytes int64
	UploadTimeout  time.Duration
	// Stopping, optional, is closed when the daemon starts to stop: watch
	// streams, which have nothing to finish, end then (unavailable)
	// rather than hold up the drain.
	Stopping <-chan struct{}
}

// server holds the handlers' shared state.
type server struct {
	cfg      Config
	core     Core
	watchers *watchers.Registry // CreateWatcher's, of every sandbox
}

// New returns envd's routes for one sandbox's requests: /health, /envs,
// /files and the Connect-RPC process and filesystem services.
func New(cfg Config) (http.Handler, error) {
	if cfg.Core == nil || cfg.Sandbox == nil || cfg.MaxUploadBytes <= 0 || cfg.UploadTimeout <= 0 {
		return nil, errors.New("envd: Config.Core, Sandbox, MaxUploadBytes and UploadTimeout are required")
	}
	s := &server{cfg: cfg, core: cfg.Core, watchers: watchers.NewRegistry()}
	m := http.NewServeMux()
	m.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	m.HandleFunc("GET /envs", s.handleEnvs)
	m.HandleFunc("GET /files", s.handleDownload)
	m.HandleFunc("POST /files", s.handleUpload)
	path, h := processconnect.NewProcessHandler(&processService{s: s})
	m.Handle(path, h)
	path, h = filesystemconnect.NewFilesystemHandler(&filesystemService{s: s})
	m.Handle(path, h)
	return m, nil
}

// id is the session id of a request's sandbox.
func (s *server) id(ctx context.Context) string { return s.cfg.Sandbox(ctx).ID }

// errorJSON is envd's REST error body.
type errorJSON struct {
	Message string `json:"message"`
	Code    int    `json:"code"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers a REST route's error with its status by errhttp, the
// table of /v1 and E2B's control plane too, so the three never differ.
func writeError(w http.ResponseWriter, err error) {
	st, _ := httpkit.ToHTTP(err)
	writeJSON(w, st, errorJSON{Message: err.Error(), Code: st})
}

// connectError is err as a Connect error, by errconnect, the one table
// from a class to a Connect code. The process agent's errors (this
// package uses the agent directly, not through the core) get their class
// here first.
func connectError(err error) error {
	switch {
	case errors.Is(err, procs.ErrNotFound):
		err = errdefs.In(errdefs.ErrNotFound, err)
	case errors.Is(err, procs.ErrStart), errors.Is(err, procs.ErrStdin), errors.Is(err, procs.ErrNotPty):
		err = errdefs.In(errdefs.ErrInvalidArgument, err)
	case errors.Is(err, procs.ErrClosed):
		err = errdefs.In(errdefs.ErrUnavailable, err)
	}
	return errconnect.ToConnect(err)
}
