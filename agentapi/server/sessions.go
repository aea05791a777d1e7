package server

import (
	"context"
	"net/http"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon"
)

func (s *Server) sessionRoutes() []route {
	v := "/" + agentapi.Version + "/sessions"
	routes := []route{
		{http.MethodPost, v, s.handleSessionCreate},
		{http.MethodGet, v, s.handleSessionList},
		{http.MethodGet, v + "/{id}", s.handleSessionGet},
		{http.MethodDelete, v + "/{id}", s.handleSessionDelete},
		{http.MethodPost, v + "/{id}/exec", s.handleSessionExec},
		{http.MethodPost, v + "/{id}/pause", s.handleSessionPause},
		{http.MethodPost, v + "/{id}/resume", s.handleSessionResume},
		{http.MethodPost, v + "/{id}/fork", s.handleSessionFork},
		{http.MethodPost, v + "/{id}/park", s.handleSessionPark},
		{http.MethodPost, v + "/{id}/revive", s.handleSessionRevive},
		{http.MethodPost, v + "/{id}/terminal", s.handleTerminal},
		{http.MethodGet, v + "/{id}/watch", s.handleSessionWatch},
	}
	return append(routes, s.fileRoutes(v, fileTree{key: "id",
		list: s.core.ListFiles, write: s.core.WriteFile, read: s.core.ReadFile, remove: s.core.RemoveFile})...)
}

func (s *Server) handleSessionCreate(w http.ResponseWriter, r *http.Request) {
	var req agentapi.SessionRequest
	release, err := s.decode(w, r, &req)
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	sess, err := s.core.CreateSession(r.Context(), &req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, sess)
}

func (s *Server) handleSessionList(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, agentapi.SessionList{Sessions: s.core.Sessions(r.Context())})
}

func (s *Server) handleSessionGet(w http.ResponseWriter, r *http.Request) {
	sess, err := s.core.Session(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sess)
}

func (s *Server) handleSessionDelete(w http.ResponseWriter, r *http.Request) {
	if err := s.core.DeleteSession(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleSessionPause(w http.ResponseWriter, r *http.Request) {
	s.sessionCall(w, r, s.core.PauseSession)
}

func (s *Server) handleSessionResume(w http.ResponseWriter, r *http.Request) {
	s.sessionCall(w, r, s.core.ResumeSession)
}

// handleSessionFork answers 201 with the branches; the body may be empty
// (one branch).
func (s *Server) handleSessionFork(w http.ResponseWriter, r *http.Request) {
	var req agentapi.ForkRequest
	if r.ContentLength != 0 {
		release, err := s.decode(w, r, &req)
		if err != nil {
			writeError(w, err)
			return
		}
		defer release()
	}
	out, err := s.core.ForkSession(r.Context(), r.PathValue("id"), req.Count)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) handleSessionPark(w http.ResponseWriter, r *http.Request) {
	s.sessionCall(w, r, s.core.ParkSession)
}

func (s *Server) handleSessionRevive(w http.ResponseWriter, r *http.Request) {
	out, err := s.core.ReviveSession(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// sessionCall answers a body-less call on a session with its description.
func (s *Server) sessionCall(w http.ResponseWriter, r *http.Request, call func(context.Context, string) (*agentapi.Session, error)) {
	sess, err := call(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sess)
}

func (s *Server) handleSessionExec(w http.ResponseWriter, r *http.Request) {
	var req agentapi.ExecRequest
	s.serveRun(w, r, &req, func(ctx context.Context, opts daemon.RunOptions) (*agentapi.RunResult, error) {
		return s.core.Exec(ctx, r.PathValue("id"), &req, opts)
	})
}
