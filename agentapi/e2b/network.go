package e2b

import (
	"net/http"

	"github.com/nsbox/nsbox/agentapi/e2b/network"
)

// handleUpdateNetwork is PUT /sandboxes/{id}/network
// (Sandbox.updateNetwork): a running sandbox's denyOut replaced, its
// egress unchanged (network.Info.Updated); 204, or a 400 naming the
// field and the sandbox unchanged.
func (s *Server) handleUpdateNetwork(w http.ResponseWriter, r *http.Request) {
	var req network.Update
	release, err := s.decode(w, r, &req)
	if err != nil {
		writeErr(w, err)
		return
	}
	defer release()
	sb, _, err := s.live(r.Context(), r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	next, err := sb.networkInfo().Updated(req)
	if err != nil {
		writeErr(w, err)
		return
	}
	sb.mu.Lock()
	sb.network = next
	sb.mu.Unlock()
	if err := s.keepRecord(r.Context(), sb); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
