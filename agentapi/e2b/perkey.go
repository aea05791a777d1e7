package e2b

import (
	"fmt"
	"net/http"
)

// enter counts a request of key in flight, or reports false when the key
// already has MaxKeyRequests: the connection budget is per address, and
// on loopback a client can dial from any of 127.0.0.0/8, so the key, once
// known, is what stops one caller holding the requests another needs.
func (s *Server) enter(key int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight[key] >= s.cfg.MaxKeyRequests {
		return false
	}
	s.inflight[key]++
	return true
}

func (s *Server) leave(key int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight[key]--; s.inflight[key] <= 0 {
		delete(s.inflight, key)
	}
}

// serveKeyed serves r for key within its budget of requests in flight,
// else answers 429 with Retry-After.
func (s *Server) serveKeyed(key int, h http.Handler, w http.ResponseWriter, r *http.Request) {
	if !s.enter(key) {
		w.Header().Set("Retry-After", "1")
		writeAPIError(w, http.StatusTooManyRequests, fmt.Sprintf("this API key has %d requests in flight, its most: retry when one has ended (docs/E2B.md, Limits)", s.cfg.MaxKeyRequests))
		return
	}
	defer s.leave(key)
	h.ServeHTTP(w, r)
}
