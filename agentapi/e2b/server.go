package e2b

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/e2b/apikeys"
	"github.com/nsbox/nsbox/agentapi/e2b/envd"
	"github.com/nsbox/nsbox/agentapi/e2b/hostports"
	"github.com/nsbox/nsbox/agentapi/e2b/interp"
	"github.com/nsbox/nsbox/agentapi/e2b/snapshots"
	"github.com/nsbox/nsbox/agentapi/httpkit"
	"github.com/nsbox/nsbox/daemon"
)

// The ports E2B's SDKs address inside a sandbox: envd and the code
// interpreter. Both are served by the one listener.
const (
	EnvdPort        = 49983
	InterpreterPort = 49999
)

// EnvdVersion is the envd version nsbox answers as, the SDKs' gate on
// what they ask of envd: 0.6.2 file metadata (user.e2b.* extended
// attributes, package envd's metadata.go), 0.6.3 a watch event's entry
// (include_entry), 0.6.4 allow_network_mounts on a watch (accepted: a
// sandbox mounts no network filesystem, so it changes nothing).
const EnvdVersion = "0.6.4"

// Keys are the endpoint's API keys (package apikeys); NewKeys and LoadKeys
// make them.
type Keys = apikeys.Keys

var NewKeys, LoadKeys = apikeys.New, apikeys.Load

// Config configures a Server. Core and Keys are required.
type Config struct {
	Core   Core
	Keys   *Keys
	Logger *slog.Logger // nil discards
	// ShutdownGrace is how long requests in flight may finish on shutdown
	// (default 30s).
	ShutdownGrace time.Duration
	// Limits: the header, body and connection limits and deadlines of
	// /v1 (httpkit's defaults). Anyone on the host can connect to a
	// loopback port, key or not: these keep the daemon's memory and
	// descriptors bounded whatever they do. MaxBodyBytes and the
	// in-flight budget bound the JSON bodies, which are held in memory.
	httpkit.Limits
	// Bodies, when set, is a body budget shared with another listener
	// (the daemon has one for /v1 and E2B together); its limits replace
	// the body fields of Limits. Nil: one of the server's own.
	Bodies *httpkit.Bodies
	// MaxUploadBytes bounds a request that is streamed rather than held:
	// an envd file upload (POST /files, copied into the workspace as it
	// arrives) and a Connect-RPC call (default 128 MiB).
	MaxUploadBytes int64
	// UploadTimeout is how long a file upload may take (default 5
	// minutes): MaxUploadBytes in 30 s would take 4 MiB/s.
	UploadTimeout time.Duration
	// MaxKeyRequests bounds one API key's requests in flight, on the
	// control plane and on its sandboxes' (default MaxConns/2); past it
	// 429 with Retry-After.
	MaxKeyRequests int
	// LegacyDir is where an older endpoint kept the records of its
	// paused sandboxes (<state_dir>/e2b): New moves them into their
	// parked sessions and removes them (migrate.go). Empty: none.
	LegacyDir string
}

// Server serves E2B's protocol over the core.
type Server struct {
	cfg         Config
	core        Core
	log         *slog.Logger
	control     *http.ServeMux
	snaps       *snapshots.Handler
	envd        http.Handler
	interpreter *http.ServeMux
	cwds        interp.Cwds // Python contexts' working directories

	bodies *httpkit.Bodies

	mu        sync.Mutex
	sandboxes map[string]*sandbox
	ended     tombstones    // the credentials of sandboxes that ended
	inflight  map[int]int   // requests in flight per key
	stopping  chan struct{} // closed when Run starts to drain: envd's watches end
}

// New checks cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Core == nil || cfg.Keys == nil {
		return nil, errors.New("e2b: Config.Core and Config.Keys are required")
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
	if cfg.MaxKeyRequests <= 0 {
		cfg.MaxKeyRequests = max(1, cfg.MaxConns/2)
	}
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = 128 << 20
	}
	if cfg.UploadTimeout <= 0 {
		cfg.UploadTimeout = 5 * time.Minute
	}
	s := &Server{cfg: cfg, core: cfg.Core, log: cfg.Logger, bodies: cfg.Bodies, sandboxes: map[string]*sandbox{}, inflight: map[int]int{}, stopping: make(chan struct{})}
	if cfg.LegacyDir != "" {
		s.migrate(context.Background(), cfg.LegacyDir)
	}
	for _, sb := range s.load(context.Background()) {
		s.sandboxes[sb.id] = sb
	}
	if n := len(s.sandboxes); n > 0 {
		s.log.Info("e2b: paused sandboxes loaded", "count", n)
	}
	s.snaps = &snapshots.Handler{Core: cfg.Core, Key: func(r *http.Request) string { return cfg.Keys.Fingerprint(keyOf(r.Context())) }, Sandbox: s.running, Decode: s.decode, WriteErr: writeErr, Log: s.log}
	s.control = s.controlRoutes()
	var err error
	if s.envd, err = envd.New(envd.Config{
		Core: cfg.Core, MaxUploadBytes: cfg.MaxUploadBytes, UploadTimeout: cfg.UploadTimeout, Stopping: s.stopping,
		Sandbox: func(ctx context.Context) envd.Sandbox {
			sb := sandboxOf(ctx)
			return envd.Sandbox{ID: sb.id, Envs: sb.envs}
		},
	}); err != nil {
		return nil, err
	}
	s.interpreter = s.interpreterRoutes()
	return s, nil
}

func (s *Server) controlRoutes() *http.ServeMux {
	m := http.NewServeMux()
	for _, p := range []string{"/sandboxes", "/v2/sandboxes"} {
		m.HandleFunc("POST "+p, s.handleCreate)
		m.HandleFunc("GET "+p, s.handleList)
	}
	m.HandleFunc("GET /sandboxes/{id}", s.handleGet)
	m.HandleFunc("DELETE /sandboxes/{id}", s.handleKill)
	m.HandleFunc("POST /sandboxes/{id}/timeout", s.handleTimeout)
	m.HandleFunc("POST /sandboxes/{id}/connect", s.handleConnect)
	m.HandleFunc("POST /v2/sandboxes/{id}/connect", s.handleConnect)
	m.HandleFunc("POST /sandboxes/{id}/pause", s.handlePause)
	m.HandleFunc("POST /sandboxes/{id}/resume", s.handleResume)
	m.HandleFunc("POST /sandboxes/{id}/refreshes", s.handleRefresh)
	m.HandleFunc("GET /sandboxes/{id}/metrics", s.handleMetrics)
	m.HandleFunc("POST /sandboxes/{id}/fork", s.handleFork)
	m.HandleFunc("PUT /sandboxes/{id}/network", s.handleUpdateNetwork)
	m.HandleFunc("GET /templates/aliases/{alias}", s.handleAlias)
	s.snaps.Register(m)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, http.StatusNotFound, fmt.Sprintf("%s %s is not part of nsbox's E2B endpoint (docs/E2B.md lists what is)", r.Method, r.URL.Path))
	})
	return m
}

func (s *Server) interpreterRoutes() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, "OK") })
	m.HandleFunc("POST /execute", s.handleExecute)
	m.HandleFunc("GET /contexts", s.handleListContexts)
	m.HandleFunc("POST /contexts", s.handleCreateContext)
	m.HandleFunc("DELETE /contexts/{ctx}", s.handleRemoveContext)
	m.HandleFunc("POST /contexts/{ctx}/restart", s.handleRestartContext)
	return m
}

// ServeHTTP routes a request to a sandbox's plane or the control plane,
// after checking its credentials.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Origin") != "" && r.Header.Get("E2b-Sandbox-Id") == "" && r.Header.Get("X-API-KEY") == "" {
		writeAPIError(w, http.StatusForbidden, "requests from a browser page are refused")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes)
	id, port := r.Header.Get("E2b-Sandbox-Id"), r.Header.Get("E2b-Sandbox-Port")
	if id == "" {
		port, id = hostports.Route(r.Host)
	}
	if id == "" && r.URL.Path == "/files" && r.URL.Query().Get("signature") != "" {
		// A signed URL (uploadUrl, downloadUrl) on E2B_SANDBOX_URL has
		// no routing headers: the sandbox is the one whose token signed it.
		if sb := s.signedBy(r); sb != nil {
			id, port = sb.id, strconv.Itoa(EnvdPort)
		}
	}
	if id == "" {
		key := s.cfg.Keys.Match(r.Header.Get("X-API-KEY"))
		if key < 0 {
			s.log.Warn("e2b: request refused: missing or unknown API key", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			writeAPIError(w, http.StatusUnauthorized, "missing or unknown X-API-KEY: use a key from the daemon's [e2b] keys_file")
			return
		}
		s.serveKeyed(key, s.control, w, r.WithContext(withKey(r.Context(), key)))
		return
	}
	sb := s.lookup(id)
	var plane http.Handler
	userPort := false // a server of the sandbox's own
	switch port {
	case strconv.Itoa(EnvdPort):
		plane = s.envd
	case strconv.Itoa(InterpreterPort):
		plane = s.interpreter
	default: // a server of the sandbox's own (getHost): hostports
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			writeAPIError(w, http.StatusBadRequest, fmt.Sprintf("port %q is not a TCP port (1 to 65535)", port))
			return
		}
		plane, userPort = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sb := sandboxOf(r.Context())
			r.Host = sb.networkInfo().MaskHost(r.Host, port)
			hostports.Serve(w, r, s.core, sb.id, n, s.log)
		}), true
	}
	// Credentials first, and one answer without them whatever the id
	// names (unknown, ended, paused, dead or live): no oracle of which
	// ids exist, and nothing is done to a sandbox before it.
	ended := sb == nil
	if ended {
		sb = s.endedOne(id)
	}
	// A live sandbox created with allowPublicTraffic: true serves its own
	// servers to anyone who reaches the endpoint, as E2B's proxy does.
	public := userPort && !ended && sb.networkInfo().Public()
	if sb == nil || !public && !s.authorized(r, sb, !userPort) {
		if sb != nil && r.URL.Path == "/files" {
			if signed, expired := apikeys.SignedURL(r, sb.token, time.Now()); signed && expired { // no oracle: only the token makes one
				writeAPIError(w, http.StatusUnauthorized, "signature is already expired")
				return
			}
		}
		s.log.Warn("e2b: sandbox request refused: no valid credentials for it", "sandbox", id, "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
		writeAPIError(w, http.StatusUnauthorized, errNoCredentials(id))
		return
	}
	if ended {
		// As E2B's proxy answers for a sandbox that is gone: the SDKs
		// read 502 as "not running" (isRunning false, TimeoutError).
		writeAPIError(w, http.StatusBadGateway, fmt.Sprintf("sandbox %q is not running (it ended)", id))
		return
	}
	sess, err := s.core.Session(withSandbox(r.Context(), sb), sb.id)
	if err == nil && sess.State == agentapi.SessionParked {
		// As E2B's proxy answers for a paused sandbox (isRunning
		// false): traffic does not resume it, connect does.
		writeAPIError(w, http.StatusBadGateway, errPaused(id))
		return
	}
	if err != nil || sess.State == agentapi.SessionDead {
		// Its timeout passed, or it died: gone, as E2B's are.
		if err == nil {
			_ = s.core.DeleteSession(withSandbox(r.Context(), sb), sb.id)
		}
		s.forget(sb.id)
		writeAPIError(w, http.StatusBadGateway, fmt.Sprintf("sandbox %q is not running (it ended)", id))
		return
	}
	s.serveKeyed(sb.key, plane, w, r.WithContext(withSandbox(r.Context(), sb)))
}

// errNoCredentials is the one answer to a sandbox request without valid
// credentials for it, whatever the id names.
func errNoCredentials(id string) string {
	return fmt.Sprintf("sandbox %q: missing or wrong X-Access-Token, or no such sandbox", id)
}

// authorized: the sandbox's access token (envd) or traffic token (the
// interpreter, its own servers), the API key that created it, or, with
// signed (envd's planes), a signed file URL.
func (s *Server) authorized(r *http.Request, sb *sandbox, signed bool) bool {
	if t := r.Header.Get("X-Access-Token"); t != "" && apikeys.EqualToken(t, sb.token) {
		return true
	}
	if t := r.Header.Get("E2B-Traffic-Access-Token"); t != "" && apikeys.EqualToken(t, sb.traffic) {
		return true
	}
	if k := r.Header.Get("X-API-KEY"); k != "" && s.cfg.Keys.Match(k) == sb.key {
		return true
	}
	ok, expired := apikeys.SignedURL(r, sb.token, time.Now())
	return signed && r.URL.Path == "/files" && ok && !expired
}

// signedBy finds the sandbox whose token signed a /files URL, expired
// or not.
func (s *Server) signedBy(r *http.Request) *sandbox {
	s.mu.Lock()
	all := make([]*sandbox, 0, len(s.sandboxes))
	for _, sb := range s.sandboxes {
		all = append(all, sb)
	}
	s.mu.Unlock()
	now := time.Now()
	for _, sb := range all {
		// An expired signature still names its sandbox, which says
		// it expired.
		if signed, _ := apikeys.SignedURL(r, sb.token, now); signed {
			return sb
		}
	}
	return nil
}

// Run serves ln until ctx is done, then shuts down: new connections stop,
// requests in flight get ShutdownGrace to finish. The sandboxes are
// sessions of the core, which ends them when it closes.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	hs := s.cfg.Server(s, context.WithoutCancel(ctx), s.log)
	ln = s.cfg.Listen(ln, hs)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("e2b: serving: %w", err)
	case <-ctx.Done():
	}
	close(s.stopping)
	graceCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownGrace)
	defer cancel()
	if err := hs.Shutdown(graceCtx); err != nil {
		hs.Close()
	}
	return nil
}

type ctxKey int

const (
	keyKey ctxKey = iota
	sandboxKey
)

// The core sees E2B callers as root (daemon.Caller UID 0): their sessions
// are root's, so that no non-root user of the Unix socket sees or reaches
// them; which key may use which sandbox is this package's to decide.
func withKey(ctx context.Context, key int) context.Context {
	return context.WithValue(daemon.WithCaller(ctx, daemon.Caller{UID: 0}), keyKey, key)
}

func keyOf(ctx context.Context) int {
	k, ok := ctx.Value(keyKey).(int)
	if !ok {
		return -1
	}
	return k
}

func withSandbox(ctx context.Context, sb *sandbox) context.Context {
	return context.WithValue(daemon.WithCaller(ctx, daemon.Caller{UID: 0}), sandboxKey, sb)
}

func sandboxOf(ctx context.Context) *sandbox {
	sb, _ := ctx.Value(sandboxKey).(*sandbox)
	return sb
}
