package session

import (
	"context"
	"fmt"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/runner"
)

// stateTimeout bounds a snapshot or restore when the session has no exec
// timeout: pickling runs the session's own code (__reduce__).
const stateTimeout = time.Minute

// stateHeadroom is the memory a snapshot leaves the session, besides the
// state itself: the pickler's own buffers.
const stateHeadroom = 16 << 20

// Capture holds the session while fn runs, for a fork or a park: no exec
// or other operation runs meanwhile, and one that is running fails the
// capture at once (ErrBusy); a dead session gives ErrDead and a Node one
// ErrNotPython. A paused session is thawed for the snapshot and paused
// again after. fn gets the interpreter's user state (runner.Snapshot, at
// most maxBytes; Capture closes it after fn) and the workspace; fn may
// End the session.
func (s *Session) Capture(ctx context.Context, maxBytes int64, fn func(st *runner.State, ws *container.Workspace) error) error {
	if !s.opts.Runner.Snapshots() {
		return fmt.Errorf("session %s: %w", s.id, ErrNotPython)
	}
	select {
	case s.sem <- struct{}{}:
	default:
		return fmt.Errorf("session %s: %w", s.id, ErrBusy)
	}
	defer func() { <-s.sem }()
	s.mu.Lock()
	state, why := s.state, s.deadWhy
	s.mu.Unlock()
	switch state {
	case StateDead:
		return fmt.Errorf("session %s: %w: %s", s.id, ErrDead, why)
	case StatePaused:
		if err := s.resumeHeld(); err != nil {
			return err
		}
		defer func() {
			if err := s.pauseHeld(); err != nil && s.Info().State != StateDead {
				s.log.Warn("pause again after a capture", "err", err)
			}
		}()
	}
	// The state is written into a memfd charged to the session's memory:
	// it may take only what the session has left (less some room), or
	// the snapshot would be the session's OOM kill.
	if limit := s.opts.Limits.MemoryBytes; limit > 0 {
		if stats, err := s.r.Sandbox().Stats(); err == nil && stats.MemoryBytes > 0 {
			free := max(limit-stats.MemoryBytes-stateHeadroom, 1)
			if maxBytes <= 0 || free < maxBytes {
				maxBytes = free
			}
		}
	}
	st, err := s.r.Snapshot(ctx, maxBytes, s.stateTimeout())
	if err != nil {
		if dst, why := s.r.Dead(); dst != "" {
			s.die(dst, why)
		}
		return fmt.Errorf("session %s: %w", s.id, err)
	}
	defer st.Close()
	return fn(st, s.r.Sandbox().Workspace())
}

// Load fills a new session from a captured one, before its first exec:
// files writes its workspace (a copy, an archive), then st is restored
// into its interpreter. It returns the names that failed to load.
func (s *Session) Load(ctx context.Context, st *runner.State, files func(ws *container.Workspace) error) ([]runner.NotCarried, error) {
	if err := s.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.release()
	if files != nil {
		if err := files(s.r.Sandbox().Workspace()); err != nil {
			return nil, fmt.Errorf("session %s: workspace: %w", s.id, err)
		}
	}
	failed, err := s.r.Restore(ctx, st, s.stateTimeout())
	if err != nil {
		if dst, why := s.r.Dead(); dst != "" {
			s.die(dst, why)
		}
		return nil, fmt.Errorf("session %s: %w", s.id, err)
	}
	return failed, nil
}

func (s *Session) stateTimeout() time.Duration {
	if t := s.opts.Limits.Timeout; t > 0 {
		return max(t, stateTimeout)
	}
	return stateTimeout
}

// End ends the session's sandbox and forgets it, with why as its reason
// (a park). The caller may hold it (inside Capture).
func (s *Session) End(why string) {
	s.idleTimer.Stop()
	s.die(runner.StatusKilled, why)
	s.m.remove(s.id)
}

// Options are the options the session was created with, filled.
func (s *Session) Options() Options { return s.opts }
