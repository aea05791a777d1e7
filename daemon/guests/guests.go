// Package guests keeps the sessions' guest interpreters
// (container/runner/guest): a bash session or a Node.js runner beside a
// session's own interpreter, in its sandbox, started through its process
// agent at the first cell of its context. A guest is named by its session
// and context; one that died (its cell ignored an interrupt, it exited,
// its session ended or was parked and revived with a new agent) is
// started afresh at the next cell, its state gone, as a notebook restarts
// a kernel that died.
package guests

import (
	"context"
	"sync"

	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/container/runner/guest"
)

// Ref names a guest: its session's context and the interpreter it runs.
type Ref struct {
	Session, Context string
	Kind             guest.Kind
	// Cwd is the working directory it starts in ("": the sandbox's home).
	Cwd string
}

type key struct{ session, context string }

// entry is one context's guest; its mu serialises the start.
type entry struct {
	mu sync.Mutex
	g  *guest.Guest
	a  *procs.Agent // the agent g was started through
	k  guest.Kind
}

// Set is the daemon's guests. The zero Set is ready.
type Set struct {
	mu sync.Mutex
	m  map[key]*entry
}

// Guest returns ref's live guest, started through a when it has none (or
// one of another kind, or through another agent: a revived session's).
func (s *Set) Guest(ctx context.Context, a *procs.Agent, ref Ref) (*guest.Guest, error) {
	e := s.entry(ref)
	e.mu.Lock()
	defer e.mu.Unlock()
	if !s.holds(ref, e) { // swept meanwhile: its guest had died
		e.mu.Unlock()
		defer e.mu.Lock()
		return s.Guest(ctx, a, ref)
	}
	if e.g != nil && e.a == a && e.k == ref.Kind && e.g.Dead() == "" {
		return e.g, nil
	}
	if e.g != nil {
		e.g.Close()
		e.g = nil
	}
	g, err := guest.Start(ctx, a, ref.Kind, guest.Options{Cwd: ref.Cwd, Tag: "nsbox-guest-" + string(ref.Kind) + "-" + ref.Context})
	if err != nil {
		return nil, err
	}
	e.g, e.a, e.k = g, a, ref.Kind
	return g, nil
}

// Has reports whether the context has a live guest.
func (s *Set) Has(session, context string) bool {
	s.mu.Lock()
	e := s.m[key{session, context}]
	s.mu.Unlock()
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.g != nil && e.g.Dead() == ""
}

// Drop ends a context's guest, if it has one.
func (s *Set) Drop(session, context string) {
	s.mu.Lock()
	e := s.m[key{session, context}]
	delete(s.m, key{session, context})
	s.mu.Unlock()
	if e != nil {
		e.mu.Lock()
		if e.g != nil {
			e.g.Close()
		}
		e.mu.Unlock()
	}
}

// entry returns ref's entry, made when missing; it sweeps the entries
// whose guest died first (an ended session's), so the map does not keep
// them.
func (s *Set) entry(ref Ref) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{ref.Session, ref.Context}
	if e := s.m[k]; e != nil {
		return e
	}
	if s.m == nil {
		s.m = map[key]*entry{}
	}
	for k, e := range s.m {
		if e.mu.TryLock() {
			if e.g != nil && e.g.Dead() != "" {
				delete(s.m, k)
			}
			e.mu.Unlock()
		}
	}
	e := &entry{}
	s.m[k] = e
	return e
}

// holds reports whether e is still ref's entry.
func (s *Set) holds(ref Ref, e *entry) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key{ref.Session, ref.Context}] == e
}
