package session

import "errors"

// Sentinel errors; wrapped with context.
var (
	ErrNotFound = errors.New("no such session (it may have expired or been deleted)")
	ErrTooMany  = errors.New("too many live sessions; delete one or raise --max-sessions")
	ErrDead     = errors.New("the session is dead; create a new one")
	ErrClosed   = errors.New("the session manager is shutting down")
	ErrBusy     = errors.New("the session is running an exec; pause, fork or park it once the exec is over")
	// ErrNoProcesses: the session was created without Options.Processes.
	ErrNoProcesses = errors.New("the session has no process agent (create it with processes enabled)")
	ErrLifetime    = errors.New("invalid session lifetime")
	// ErrNotPython: fork and park carry a Python interpreter's state.
	ErrNotPython = errors.New("fork and park are for Python sessions")
)
