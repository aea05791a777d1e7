package e2b

import (
	"fmt"
	"maps"
	"net/http"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon"
)

// forkRequest is the body of POST /sandboxes/{id}/fork.
type forkRequest struct {
	Timeout *int64 `json:"timeout"` // seconds: the forks' timeout
	Count   *int   `json:"count"`
}

// forkResult is one entry of the fork's answer: a sandbox or an error.
type forkResult struct {
	Sandbox *sandboxJSON `json:"sandbox"`
	Error   *apiError    `json:"error"`
}

// handleFork forks a running sandbox into count new ones (nsbox's session
// fork, docs/SESSIONS.md): each gets the parent's files and every code
// context's Python state, its own sandbox, tokens and 128-bit id, the
// parent's template, metadata, envs and onTimeout, and the timeout given
// (else E2B's default). The parent is unchanged. All or nothing: if one
// fork fails none is made and the call fails with the reason (E2B answers
// per fork; the SDK raises the same error classes either way).
func (s *Server) handleFork(w http.ResponseWriter, r *http.Request) {
	var req forkRequest
	release, err := s.decode(w, r, &req)
	if err != nil {
		writeErr(w, err)
		return
	}
	defer release()
	n := 1
	if req.Count != nil {
		n = *req.Count
	}
	timeout, err := timeoutOr(req.Timeout)
	if err != nil {
		writeErr(w, err)
		return
	}
	parent, sess, err := s.live(r.Context(), r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	if sess.State == agentapi.SessionParked {
		writeAPIError(w, http.StatusConflict, errPaused(parent.id))
		return
	}
	// Each fork's record (new id and tokens, the parent's fields) is its
	// session's Meta from the start.
	recs, fo := make([]*record, max(n, 0)), daemon.ForkOptions{Count: n, Lifetime: timeout}
	now := time.Now()
	for i := range recs {
		rec := recordOf(parent, s.cfg.Keys)
		rec.ID, rec.Token, rec.Traffic, rec.Started = randomHex(16), randomHex(24), randomHex(24), now
		rec.Metadata, rec.Envs = maps.Clone(rec.Metadata), maps.Clone(rec.Envs)
		m, err := rec.meta()
		if err != nil {
			writeErr(w, err)
			return
		}
		recs[i], fo.IDs, fo.Meta = rec, append(fo.IDs, rec.ID), append(fo.Meta, m)
	}
	res, err := s.core.ForkSessionWith(r.Context(), parent.id, fo)
	if err != nil {
		s.log.Info("e2b: fork refused", "sandbox", parent.id, "count", n, "err", err)
		writeErr(w, fmt.Errorf("sandbox %q: fork: %w", parent.id, err))
		return
	}
	out := make([]forkResult, 0, len(res.Sessions))
	for i, b := range res.Sessions {
		sb := recs[i].sandbox(parent.key)
		sb.started = b.CreatedAt
		s.mu.Lock()
		s.sandboxes[sb.id] = sb
		s.mu.Unlock()
		if len(b.NotCarried) > 0 {
			s.log.Info("e2b: fork: not carried", "sandbox", sb.id, "not_carried", b.NotCarried)
		}
		d := s.describe(sb, &b.Session, true)
		out = append(out, forkResult{Sandbox: &d})
	}
	s.log.Info("e2b: sandbox forked", "sandbox", parent.id, "forks", len(out), "timeout", timeout)
	writeJSON(w, http.StatusOK, out)
}
