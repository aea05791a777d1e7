package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/httpkit"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// A paused E2B sandbox is a parked nsbox session (docs/SESSIONS.md, "Park
// and revive"): its Python state and workspace on disk, no sandbox, its
// id, tokens and owner kept. Connect (or the legacy resume) revives it.
// Its envd and interpreter answer 502 meanwhile, as E2B's proxy does for
// a sandbox that is not running: a paused sandbox is not resumed by
// traffic (E2B's autoResume, which nsbox does not offer).

// pauseRequest is the body of POST /sandboxes/{id}/pause. Memory false
// (keepMemory: false) asks for the files only; nsbox keeps the Python
// state too, which is more than asked and harmless.
type pauseRequest struct {
	Memory *bool `json:"memory"`
}

// resumeRequest is the body of POST /sandboxes/{id}/connect and the
// legacy /resume: the new timeout, and memory false for a resume with the
// files only (onResume: "reboot"), which nsbox does not do.
type resumeRequest struct {
	Timeout   *int64 `json:"timeout"` // seconds
	Memory    *bool  `json:"memory"`
	AutoPause *bool  `json:"autoPause"` // legacy /resume
}

// errPaused answers a sandbox plane request to a paused sandbox.
func errPaused(id string) string {
	return fmt.Sprintf("sandbox %q is paused: Sandbox.connect resumes it", id)
}

// handlePause parks the sandbox's session: 204, or 409 when it is already
// paused (the SDK's pause returns false then). A sandbox running a cell
// or a command's request is 503, retry: 409 would read as "paused".
func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) {
	var req pauseRequest
	release, err := s.decode(w, r, &req)
	if err != nil {
		writeErr(w, err)
		return
	}
	defer release()
	sb, sess, err := s.live(r.Context(), r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	if sess.State == agentapi.SessionParked {
		writeAPIError(w, http.StatusConflict, fmt.Sprintf("sandbox %q is already paused", sb.id))
		return
	}
	// The sandbox's record is its session's Meta, which the park writes
	// with the session (record.go).
	s.cwds.Forget(sb.id) // a revived interpreter starts in its home
	if _, err := s.core.ParkSession(r.Context(), sb.id); err != nil {
		s.log.Info("e2b: pause refused", "sandbox", sb.id, "err", err)
		switch {
		case errors.Is(err, errdefs.ErrSessionBusy):
			httpkit.RetryAfter(w, http.StatusServiceUnavailable, err)
			writeAPIError(w, http.StatusServiceUnavailable, fmt.Sprintf("sandbox %q is busy (a cell or a file operation is running); it stays running: pause it when idle (%v)", sb.id, err))
			return
		case errors.Is(err, errdefs.ErrSessionDead):
			// It died since live looked: gone, as live says of a dead
			// one (a 409 would tell the SDK "already paused").
			writeErr(w, errdefs.In(errdefs.ErrNotFound, fmt.Errorf("sandbox %q ended: %v", sb.id, err)))
			return
		}
		writeErr(w, err)
		return
	}
	s.log.Info("e2b: sandbox paused", "sandbox", sb.id)
	w.WriteHeader(http.StatusNoContent)
}

// resume revives the sandbox's session when it is paused and sets its
// timeout: the one given, else E2B's default. A running sandbox's timeout
// only ever grows, and only when one is given: E2B's connect keeps an end
// later than the one asked for (its API's KeepAliveFor, allowShorter
// false), where /timeout sets it either way. resumed says whether it was
// paused.
func (s *Server) resume(ctx context.Context, id string, req *resumeRequest) (sb *sandbox, sess *agentapi.Session, resumed bool, err error) {
	timeout, err := timeoutOr(req.Timeout)
	if err != nil {
		return nil, nil, false, err
	}
	sb, sess, err = s.live(ctx, id)
	if err != nil || sess.State != agentapi.SessionParked {
		if err == nil && req.Timeout != nil && time.Now().Add(timeout).After(sess.ExpiresAt) {
			sess, err = s.core.SetSessionLifetime(ctx, id, timeout)
		}
		return sb, sess, false, err
	}
	switch {
	case req.Memory != nil && !*req.Memory:
		return nil, nil, false, errdefs.Field("memory", "resuming with the files only (onResume: \"reboot\") is not supported by nsbox's E2B endpoint: it revives the Python state too; the sandbox stays paused")
	case req.AutoPause != nil && *req.AutoPause:
		return nil, nil, false, errdefs.Field("autoPause", "pausing on timeout is not supported by nsbox's E2B endpoint; the sandbox stays paused")
	}
	if _, err := s.core.ReviveSession(ctx, id); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			s.forget(id)
		}
		return nil, nil, false, err
	}
	if sess, err = s.core.SetSessionLifetime(ctx, id, timeout); err != nil {
		// Revived with what was left of its lifetime: running, and
		// the caller learns why its timeout was not taken.
		return sb, nil, true, err
	}
	s.log.Info("e2b: sandbox resumed", "sandbox", id, "timeout", timeout)
	return sb, sess, true, nil
}

// handleConnect answers the sandbox, resuming it when paused: 201 when
// it was resumed, 200 when it was running (E2B's codes).
func (s *Server) handleConnect(w http.ResponseWriter, r *http.Request) {
	var req resumeRequest
	release, err := s.decode(w, r, &req)
	if err != nil {
		writeErr(w, err)
		return
	}
	defer release()
	req.AutoPause = nil // not a field of connect
	sb, sess, resumed, err := s.resume(r.Context(), r.PathValue("id"), &req)
	if err != nil {
		writeErr(w, err)
		return
	}
	status := http.StatusOK
	if resumed {
		status = http.StatusCreated
	}
	writeJSON(w, status, s.describe(sb, sess, true))
}

// handleResume is the legacy POST /sandboxes/{id}/resume: 201 with the
// sandbox when it was paused, 409 when it is running.
func (s *Server) handleResume(w http.ResponseWriter, r *http.Request) {
	var req resumeRequest
	release, err := s.decode(w, r, &req)
	if err != nil {
		writeErr(w, err)
		return
	}
	defer release()
	id := r.PathValue("id")
	if _, sess, err := s.live(r.Context(), id); err != nil {
		writeErr(w, err)
		return
	} else if sess.State != agentapi.SessionParked {
		writeAPIError(w, http.StatusConflict, fmt.Sprintf("sandbox %q is already running", id))
		return
	}
	sb, sess, _, err := s.resume(r.Context(), id, &req)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.describe(sb, sess, true))
}
