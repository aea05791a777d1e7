package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/runner"
	"github.com/nsbox/nsbox/container/session"
)

// ErrNoSessions: the Runner cannot start long-lived sandboxes.
var ErrNoSessions = errors.New("sessions need a Runner that can start sandboxes (a *container.Engine)")

func (s *Server) sessionRoutes() []route {
	v := "/" + agentapi.Version + "/sessions"
	return []route{
		{http.MethodPost, v, s.handleSessionCreate},
		{http.MethodGet, v, s.handleSessionList},
		{http.MethodGet, v + "/{id}", s.handleSessionGet},
		{http.MethodDelete, v + "/{id}", s.handleSessionDelete},
		{http.MethodPost, v + "/{id}/exec", s.handleSessionExec},
		{http.MethodGet, v + "/{id}/files", s.handleFileList},
		{http.MethodPut, v + "/{id}/files/{path...}", s.handleFilePut},
		{http.MethodGet, v + "/{id}/files/{path...}", s.handleFileGet},
		{http.MethodDelete, v + "/{id}/files/{path...}", s.handleFileDelete},
	}
}

// newSessions makes the session manager when the Runner can start
// sandboxes.
func (s *Server) newSessions() {
	st, ok := s.cfg.Runner.(runner.Starter)
	if !ok {
		return
	}
	s.sessions = session.New(session.Config{
		Starter:            st,
		Logger:             s.log,
		MaxSessions:        s.cfg.MaxSessions,
		MaxLifetime:        s.cfg.SessionMaxLifetime,
		DefaultIdleTimeout: s.cfg.SessionIdleTimeout,
		OnEnd:              func(st runner.Status) { s.sm.ended.WithLabelValues(string(st)).Inc() },
		Take:               s.takeForSession,
	})
	s.sm.register(s.metrics.reg, s.sessions)
}

// sessionError gives session and workspace errors their HTTP status.
func sessionError(err error) error {
	st, code := 0, ""
	switch {
	case errors.Is(err, session.ErrNotFound), errors.Is(err, container.ErrNotExist):
		st, code = http.StatusNotFound, agentapi.CodeNotFound
	case errors.Is(err, session.ErrTooMany):
		st, code = http.StatusTooManyRequests, agentapi.CodeResourceExhausted
	case errors.Is(err, session.ErrDead):
		st, code = http.StatusConflict, agentapi.CodeSessionDead
	case errors.Is(err, session.ErrClosed):
		return fmt.Errorf("%v: %w", err, ErrShuttingDown)
	case errors.Is(err, container.ErrInvalidPath), errors.Is(err, container.ErrNotRegular):
		st, code = http.StatusBadRequest, agentapi.CodeInvalidArgument
	case errors.Is(err, container.ErrTooLarge):
		st, code = http.StatusRequestEntityTooLarge, agentapi.CodePayloadTooLarge
	default:
		return err
	}
	return &agentapi.Error{Code: code, Message: err.Error(), Status: st}
}

func (s *Server) session(w http.ResponseWriter, r *http.Request) (*session.Session, bool) {
	if s.sessions == nil {
		writeError(w, ErrNoSessions)
		return nil, false
	}
	sess, err := s.sessions.Get(r.PathValue("id"))
	if err != nil {
		writeError(w, sessionError(err))
		return nil, false
	}
	return sess, true
}

func wireSession(in session.Info) agentapi.Session {
	return agentapi.Session{
		ID: in.ID, Rootfs: in.Rootfs, State: string(in.State), DeadStatus: string(in.DeadStatus), DeadReason: in.DeadReason,
		CreatedAt: in.Created.UTC(), LastUsedAt: in.LastUsed.UTC(), ExecCount: in.ExecCount,
		IdleTimeoutMs: in.IdleTimeout.Milliseconds(), Limits: wireLimits(in.Limits), Pooled: in.Pooled,
	}
}

func (s *Server) handleSessionCreate(w http.ResponseWriter, r *http.Request) {
	if s.sessions == nil {
		writeError(w, ErrNoSessions)
		return
	}
	if !jsonBody(w, r) {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	var req agentapi.SessionRequest
	if err := decodeStrict(r.Body, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.IdleTimeoutMs < 0 {
		writeError(w, fieldErr("idle_timeout_ms", "must not be negative"))
		return
	}
	// The run validator checks rootfs, limits, env and files the same way.
	j, err := s.validate(&agentapi.RunRequest{Argv: []string{"python3"}, Rootfs: req.Rootfs, Limits: req.Limits, Env: req.Env, Files: req.Files})
	if err != nil {
		writeError(w, err)
		return
	}
	dir, release, err := s.cfg.Rootfs.Acquire(j.rootfs)
	if err != nil {
		writeError(w, fmt.Errorf("rootfs %q: %w", j.rootfs, err))
		return
	}
	sess, err := s.sessions.Create(r.Context(), session.Options{
		Rootfs: j.rootfs, RootfsDir: dir, Release: release, Limits: j.limits,
		IdleTimeout: time.Duration(req.IdleTimeoutMs) * time.Millisecond, Env: j.env, Files: j.files,
	})
	if err != nil {
		writeError(w, sessionError(err))
		return
	}
	writeJSON(w, http.StatusCreated, wireSession(sess.Info()))
}

func (s *Server) handleSessionList(w http.ResponseWriter, r *http.Request) {
	out := agentapi.SessionList{Sessions: []agentapi.Session{}}
	if s.sessions != nil {
		for _, in := range s.sessions.List() {
			out.Sessions = append(out.Sessions, wireSession(in))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleSessionGet(w http.ResponseWriter, r *http.Request) {
	if sess, ok := s.session(w, r); ok {
		writeJSON(w, http.StatusOK, wireSession(sess.Info()))
	}
}

func (s *Server) handleSessionDelete(w http.ResponseWriter, r *http.Request) {
	if s.sessions == nil {
		writeError(w, ErrNoSessions)
		return
	}
	if err := s.sessions.Delete(r.PathValue("id")); err != nil {
		writeError(w, sessionError(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleSessionExec(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.session(w, r)
	if !ok || !jsonBody(w, r) {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	var req agentapi.ExecRequest
	if err := decodeStrict(r.Body, &req); err != nil {
		writeError(w, err)
		return
	}
	timeout := time.Duration(req.TimeoutMs) * time.Millisecond
	switch {
	case req.TimeoutMs < 0:
		writeError(w, fieldErr("timeout_ms", "must not be negative"))
		return
	case timeout > s.pol.Load().max.Timeout:
		writeError(w, fieldErr("timeout_ms", "%d is above the daemon's maximum %d", req.TimeoutMs, s.pol.Load().max.Timeout.Milliseconds()))
		return
	}
	w.Header().Set(agentapi.HeaderRunID, sess.ID())
	ereq := runner.ExecRequest{Code: req.Code, Timeout: timeout}
	var ev *eventWriter
	if wantsNDJSON(r) {
		ev = newEventWriter(w, func() {})
		ev.emit(agentapi.Event{Type: agentapi.EventStart, ID: sess.ID()})
		ereq.OnStdout = func(b []byte) { ev.chunk(agentapi.EventStdout, b) }
		ereq.OnStderr = func(b []byte) { ev.chunk(agentapi.EventStderr, b) }
	}
	res, err := sess.Exec(r.Context(), ereq)
	if err != nil {
		err = sessionError(err)
		if ev != nil {
			_, ae := apiError(err)
			ev.emit(agentapi.Event{Type: agentapi.EventError, Error: ae})
			ev.done()
			return
		}
		writeError(w, err)
		return
	}
	out := &agentapi.RunResult{ID: sess.ID(), WallMs: res.Wall.Milliseconds(), Files: wireFiles(res.Files)}
	richFields(out, res.Result)
	out.Status = string(res.Status)
	out.Error = res.Error
	if info := sess.Info(); info.State == session.StateDead {
		out.SessionDead = true
		out.Error = info.DeadReason
	}
	s.sm.execs.WithLabelValues(out.Status).Inc()
	if ev != nil {
		ev.finish()
		ev.emit(agentapi.Event{Type: agentapi.EventResult, Result: out})
		ev.done()
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleFileList(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.session(w, r)
	if !ok {
		return
	}
	entries, files, err := sess.List(r.Context(), "")
	if err != nil {
		writeError(w, sessionError(err))
		return
	}
	sums := make(map[string]string, len(files))
	for _, f := range files {
		sums[f.Path] = f.SHA256
	}
	out := agentapi.FileList{Files: []agentapi.WorkspaceFile{}}
	for _, e := range entries {
		wf := agentapi.WorkspaceFile{Path: e.Path, Size: e.Size, Mode: e.Mode, ModTime: e.ModTime.UTC(), Dir: e.Dir, Symlink: e.Symlink, SHA256: sums[e.Path]}
		if !e.Dir && !e.Symlink {
			wf.Mime = mimeOf(e.Path, nil)
		}
		out.Files = append(out.Files, wf)
	}
	writeJSON(w, http.StatusOK, out)
}

// sessionFile resolves the session and validates the {path...} of a file
// route, answering the request itself when either is wrong.
func (s *Server) sessionFile(w http.ResponseWriter, r *http.Request) (*session.Session, string, bool) {
	sess, ok := s.session(w, r)
	if !ok {
		return nil, "", false
	}
	p := r.PathValue("path")
	if err := ValidatePath(p); err != nil {
		writeError(w, fieldErr("path", "%v", err))
		return nil, "", false
	}
	return sess, p, true
}

func (s *Server) handleFilePut(w http.ResponseWriter, r *http.Request) {
	sess, p, ok := s.sessionFile(w, r)
	if !ok {
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		writeError(w, err)
		return
	}
	if err := sess.WriteFile(r.Context(), p, data, defaultFileMode); err != nil {
		writeError(w, sessionError(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleFileGet(w http.ResponseWriter, r *http.Request) {
	sess, p, ok := s.sessionFile(w, r)
	if !ok {
		return
	}
	data, err := sess.ReadFile(r.Context(), p, s.cfg.MaxBodyBytes)
	if err != nil {
		writeError(w, sessionError(err))
		return
	}
	w.Header().Set("Content-Type", mimeOf(p, data))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", path.Base(p)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

func (s *Server) handleFileDelete(w http.ResponseWriter, r *http.Request) {
	sess, p, ok := s.sessionFile(w, r)
	if !ok {
		return
	}
	if err := sess.Remove(r.Context(), p); err != nil {
		writeError(w, sessionError(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// jsonBody refuses bodies that say they are not JSON.
func jsonBody(w http.ResponseWriter, r *http.Request) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != agentapi.ContentTypeJSON {
			writeError(w, fmt.Errorf("content type %q: %w", ct, ErrMediaType))
			return false
		}
	}
	return true
}

// decodeStrict decodes one JSON value, refusing unknown fields and
// trailing data.
func decodeStrict(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if dec.More() {
		return fieldErr("", "trailing data after the JSON body")
	}
	return nil
}
