package sessions

import "github.com/nsbox/nsbox/daemon/errdefs"

// The sessions' errors, each of a class (package errdefs); park.go and
// fork.go have their own.
var (
	// ErrNoSessions: the daemon has no Starter, so it cannot keep sandboxes.
	ErrNoSessions = errdefs.New(errdefs.ErrUnavailable, "sessions need a Starter that can start sandboxes (a *container.Engine)")
	// ErrParked: the session is parked; it has no sandbox until revived.
	ErrParked = errdefs.New(errdefs.ErrSessionParked, "the session is parked: an exec or POST /v1/sessions/{id}/revive revives it")
	// ErrNotCarriable: the session was not made through the daemon's
	// session path, so it cannot be made again.
	ErrNotCarriable = errdefs.New(errdefs.ErrInvalidArgument, "this session cannot be forked or parked")
)
