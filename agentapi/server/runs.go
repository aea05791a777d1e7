package server

import (
	"context"
	"mime"
	"net/http"
	"strings"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/httpkit"
	"github.com/nsbox/nsbox/daemon"
)

// handleRun serves POST /v1/runs: decode, hand to the core, answer with
// the result (or a stream of events).
func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	var req agentapi.RunRequest
	s.serveRun(w, r, &req, func(ctx context.Context, opts daemon.RunOptions) (*agentapi.RunResult, error) {
		return s.core.Run(ctx, &req, opts)
	})
}

// serveRun decodes a run's or an exec's body into req, then answers what
// call returns.
func (s *Server) serveRun(w http.ResponseWriter, r *http.Request, req any, call func(context.Context, daemon.RunOptions) (*agentapi.RunResult, error)) {
	done, release, ok := s.decodeWork(w, r, req)
	if !ok {
		return
	}
	defer done()
	s.answer(w, r, call, release)
}

// decodeWork decodes a run's, an exec's or a batch's body into v (an
// error is answered) and counts the request as work the drain waits for;
// done releases both. release gives the body's reservation back alone
// (once, whichever of the two calls it first), for a handler that is done
// with v before it answers.
func (s *Server) decodeWork(w http.ResponseWriter, r *http.Request, v any) (done, release func(), ok bool) {
	release, err := s.decode(w, r, v)
	if err != nil {
		writeError(w, err)
		return nil, nil, false
	}
	s.runs.Add(1)
	return func() { s.runs.Done(); release() }, release, true
}

// answer runs a run or an exec and answers it: as one JSON result, or,
// when the client accepts NDJSON, as a stream of start, stdout/stderr and
// result (or error) events. The answer goes out from OnResult, before a
// finished sandbox's teardown. A client that stops reading the stream
// cancels the run. release gives the request body's reservation back
// before the answer goes out: a client that has its answer and sends its
// next big body at once finds the budget as the answer left it.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, run func(context.Context, daemon.RunOptions) (*agentapi.RunResult, error), release func()) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	opts := daemon.RunOptions{OnStart: func(id string) { w.Header().Set(agentapi.HeaderRunID, id) }}
	// After a big result is answered, and the handler (which holds it)
	// has returned, its heap is handed back to the kernel: the runtime's
	// scavenger takes minutes, and a daemon that had answered four
	// 2 × 64 MiB results kept ~400 MiB resident while idle.
	var big bool
	defer func() {
		if big {
			s.bodies.FreeAfter(r)
		}
	}()
	if !wantsNDJSON(r) {
		opts.OnResult = func(out *agentapi.RunResult) {
			big = resultSize(out) >= httpkit.BigJSONAfter
			release()
			writeJSON(w, http.StatusOK, out)
		}
		if _, err := run(ctx, opts); err != nil {
			release()
			writeError(w, err)
		}
		return
	}
	var ev *eventWriter
	opts.OnStart = func(id string) {
		w.Header().Set(agentapi.HeaderRunID, id)
		ev = newEventWriter(w, s.cfg.WriteTimeout, cancel)
		ev.emit(agentapi.Event{Type: agentapi.EventStart, ID: id})
	}
	opts.OnStdout = func(b []byte) { ev.chunk(agentapi.EventStdout, b) }
	opts.OnStderr = func(b []byte) { ev.chunk(agentapi.EventStderr, b) }
	opts.OnResult = func(out *agentapi.RunResult) {
		big = resultSize(out) >= httpkit.BigJSONAfter
		release()
		ev.finish()
		ev.emit(agentapi.Event{Type: agentapi.EventResult, Result: out})
	}
	if _, err := run(ctx, opts); err != nil {
		release()
		if ev == nil { // refused before it started: a plain error answer
			writeError(w, err)
			return
		}
		ev.finish()
		_, ae := ToHTTP(err)
		ev.emit(agentapi.Event{Type: agentapi.EventError, Error: ae})
	}
}

func wantsNDJSON(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == agentapi.ContentTypeNDJSON {
			return true
		}
	}
	return false
}

// handleBatch serves POST /v1/runs:batch: many independent runs, each
// answered as one NDJSON line as it finishes (in finishing order, with its
// index), then a "done" line with the counts. A malformed batch is refused
// as a whole; a run that cannot be run is an "error" line and the rest go
// on. A client that stops reading cancels the runs not yet finished.
func (s *Server) handleBatch(w http.ResponseWriter, r *http.Request) {
	var req agentapi.BatchRequest
	done, _, ok := s.decodeWork(w, r, &req)
	if !ok {
		return
	}
	defer done()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var ev *eventWriter
	sum, err := s.core.RunBatch(ctx, &req, daemon.BatchOptions{
		OnStart:  func() { ev = newEventWriter(w, s.cfg.WriteTimeout, cancel) },
		Stopping: s.draining.Load,
		OnItem: func(i int, res *agentapi.RunResult, err error) {
			item := agentapi.BatchItem{Type: agentapi.BatchResult, Index: i, Result: res}
			if err != nil {
				_, ae := ToHTTP(err)
				item = agentapi.BatchItem{Type: agentapi.BatchError, Index: i, Error: ae}
			}
			ev.line(item)
		},
	})
	if err != nil {
		if ev == nil {
			writeError(w, err)
			return
		}
		_, ae := ToHTTP(err)
		ev.line(agentapi.BatchItem{Type: agentapi.BatchError, Index: -1, Error: ae})
	}
	if ev != nil {
		ev.line(agentapi.BatchItem{Type: agentapi.BatchDone, Index: -1, Done: &sum})
	}
}
