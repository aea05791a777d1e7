package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container/runner"
)

// handleRun serves POST /v1/runs: decode, validate, admit, resolve the
// rootfs, run, answer with the result (or a stream of events).
func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != agentapi.ContentTypeJSON {
			writeError(w, fmt.Errorf("content type %q: %w", ct, ErrMediaType))
			return
		}
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	req, err := DecodeRunRequest(r.Body)
	if err != nil {
		s.metrics.runs.WithLabelValues("invalid").Inc()
		writeError(w, err)
		return
	}
	j, err := s.validate(req)
	if err != nil {
		s.metrics.runs.WithLabelValues("invalid").Inc()
		writeError(w, err)
		return
	}

	s.runs.Add(1)
	defer s.runs.Done()
	id := newRunID()
	w.Header().Set(agentapi.HeaderRunID, id)
	log := s.log.With("run", id)

	queued := time.Now()
	release, err := s.adm.acquire(r.Context())
	if err != nil {
		if errors.Is(err, ErrBusy) {
			s.metrics.runs.WithLabelValues("rejected").Inc()
		}
		writeError(w, err)
		return
	}
	// The slot is held until the sandbox is gone, unless a Python run's
	// teardown gets a teardown token (below): live sandboxes stay bounded.
	releaseSlot := release
	defer func() {
		if releaseSlot != nil {
			releaseSlot()
		}
	}()
	s.metrics.queueWait.Observe(time.Since(queued).Seconds())

	dir, releaseRootfs, err := s.cfg.Rootfs.Acquire(j.rootfs)
	if err != nil {
		s.metrics.runs.WithLabelValues("invalid").Inc()
		writeError(w, fmt.Errorf("rootfs %q: %w", j.rootfs, err))
		return
	}
	defer releaseRootfs()

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	spec := j.spec(id, dir)
	if j.stdin != "" {
		spec.Stdin = strings.NewReader(j.stdin)
	}
	var ev *eventWriter
	if wantsNDJSON(r) {
		ev = newEventWriter(w, cancel)
		ev.emit(agentapi.Event{Type: agentapi.EventStart, ID: id})
		spec.Stdout = ev.stream(agentapi.EventStdout)
		spec.Stderr = ev.stream(agentapi.EventStderr)
	}

	log.Info("run started", "argv0", spec.Argv[0], "rootfs", j.rootfs, "queue_wait", time.Since(queued))
	started := time.Now()
	if st, ok := s.cfg.Runner.(runner.Starter); ok && j.language == agentapi.LanguagePython {
		var after func()
		defer func() {
			if after != nil { // once the answer is out
				_ = http.NewResponseController(w).Flush()
				s.closing.Add(1)
				select {
				case s.teardowns <- struct{}{}:
					// The run slot is free for the next run now (the
					// deferred release), while this sandbox exits.
					s.tearing.Add(1)
					go func() {
						defer s.closing.Done()
						defer func() { s.tearing.Add(-1); <-s.teardowns }()
						after()
					}()
				default:
					// Every token is taken: the slot waits for the teardown.
					rel := releaseSlot
					releaseSlot = nil
					go func() {
						defer s.closing.Done()
						defer rel()
						after()
					}()
				}
			}
		}()
		s.finishRun(w, log, ev, started, func() (*agentapi.RunResult, error) {
			return s.runPython(ctx, st, spec, j.rootfs, j.code, ev, &after)
		})
		return
	}
	s.finishRun(w, log, ev, started, func() (*agentapi.RunResult, error) {
		res, err := s.cfg.Runner.Run(ctx, spec)
		if err != nil {
			return nil, err
		}
		return wireResult(res, id), nil
	})
}

func wantsNDJSON(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == agentapi.ContentTypeNDJSON {
			return true
		}
	}
	return false
}

// newRunID returns a fresh run id: 16 lowercase hex digits.
func newRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
	return hex.EncodeToString(b[:])
}
