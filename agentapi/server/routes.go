package server

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon"
)

// route is one endpoint; the table drives both the mux and 405 answers.
type route struct {
	method, path string
	h            http.HandlerFunc
}

func (s *Server) routes() http.Handler {
	v := "/" + agentapi.Version
	table := []route{
		{http.MethodPost, v + "/runs", s.handleRun},
		{http.MethodPost, v + "/runs:batch", s.handleBatch},
		{http.MethodGet, v + "/health", s.handleHealth},
		{http.MethodGet, v + "/info", s.handleInfo},
		{http.MethodGet, "/metrics", s.MetricsHandler().ServeHTTP},
	}
	table = append(table, s.sessionRoutes()...)
	table = append(table, s.volumeRoutes()...)
	table = append(table, s.portRoutes()...)
	mux := http.NewServeMux()
	methods := map[string][]string{}
	for _, rt := range table {
		if rt.method == "" { // any method
			mux.HandleFunc(rt.path, rt.h)
			continue
		}
		mux.HandleFunc(rt.method+" "+rt.path, rt.h)
		methods[rt.path] = append(methods[rt.path], rt.method)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if m, ok := methods[r.URL.Path]; ok {
			w.Header().Set("Allow", strings.Join(m, ", "))
			writeError(w, fmt.Errorf("%s %s: %w (use %s)", r.Method, r.URL.Path, ErrMethodNotAllowed, strings.Join(m, ", ")))
			return
		}
		writeError(w, fmt.Errorf("%s %s: %w", r.Method, r.URL.Path, ErrNotFound))
	})
	return s.middleware(mux)
}

// middleware refuses browser-shaped requests and answers 503 while
// draining; it logs every request with the caller's uid/pid.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK, writeTimeout: s.cfg.WriteTimeout}
		switch {
		case r.Header.Get("Origin") != "" || r.Header.Get("Referer") != "":
			writeError(rec, ErrBrowserRequest)
		case s.draining.Load():
			writeError(rec, daemon.ErrShuttingDown)
		default:
			if pc, ok := PeerCredFrom(r.Context()); ok {
				r = r.WithContext(daemon.WithCaller(r.Context(), daemon.Caller{UID: pc.UID, Groups: append([]uint32{pc.GID}, pc.Groups...)}))
			}
			next.ServeHTTP(rec, r)
		}
		attrs := []any{"method", r.Method, "path", r.URL.Path, "status", rec.status, "duration", time.Since(start)}
		if pc, ok := PeerCredFrom(r.Context()); ok {
			attrs = append(attrs, "uid", pc.UID, "pid", pc.PID)
		}
		if id := rec.Header().Get(agentapi.HeaderRunID); id != "" {
			attrs = append(attrs, "run", id)
		}
		if rec.err != nil {
			attrs = append(attrs, "code", rec.err.Code, "error", rec.err.Message)
		}
		level := slog.LevelInfo
		if r.URL.Path == "/metrics" || strings.HasSuffix(r.URL.Path, "/health") {
			level = slog.LevelDebug
		}
		s.log.Log(r.Context(), level, "request", attrs...)
	})
}

// statusRecorder remembers the status and carries the server's write
// timeout to writeJSON; Unwrap lets http.ResponseController reach the
// real writer's Flush and SetWriteDeadline.
type statusRecorder struct {
	http.ResponseWriter
	status       int
	wroteHeader  bool
	err          *agentapi.Error // what writeError answered, for the log line
	writeTimeout time.Duration
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, agentapi.Health{Status: "ok", APIVersion: agentapi.Version})
}

func (s *Server) handleInfo(w http.ResponseWriter, r *http.Request) {
	info, err := s.core.Info(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	info.BodyBudgetBytes = s.bodies.Limits().MaxBodyBytesInFlight
	writeJSON(w, http.StatusOK, info)
}
