package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// handleSessionWatch streams the changes in a directory of a session's
// workspace as NDJSON (agentapi.WatchEvent) until the client goes, the
// directory goes ("end") or the session ends ("error"). The watch is the
// sandbox's process agent's, inside the sandbox; it is closed when the
// handler returns.
func (s *Server) handleSessionWatch(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	recursive := false
	if v := q.Get("recursive"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, errdefs.Field("recursive", "%q is not a boolean (1, true, 0, false)", v))
			return
		}
		recursive = b
	}
	wt, err := s.core.WatchDir(r.Context(), r.PathValue("id"), q.Get("path"), recursive)
	if err != nil {
		writeError(w, err)
		return
	}
	defer wt.Close()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// A watch has nothing to finish: it ends when the daemon starts to
	// stop, rather than hold up its drain for the grace period.
	go func() {
		select {
		case <-s.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	ev := newEventWriter(w, s.cfg.WriteTimeout, cancel)
	ev.line(agentapi.WatchEvent{Type: agentapi.WatchStart, Path: wt.Dir})
	for {
		evs, err := wt.Next(ctx)
		switch {
		case isClosed(s.stopping):
			_, ae := ToHTTP(daemon.ErrShuttingDown)
			ev.line(agentapi.WatchEvent{Type: agentapi.WatchError, Error: ae})
			return
		case ctx.Err() != nil: // the client went, or could not keep up
			return
		case errors.Is(err, daemon.ErrWatchEnded):
			ev.line(agentapi.WatchEvent{Type: agentapi.WatchEnd})
			return
		case err != nil:
			_, ae := ToHTTP(err)
			ev.line(agentapi.WatchEvent{Type: agentapi.WatchError, Error: ae})
			return
		}
		for _, e := range evs {
			ev.line(e)
		}
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
