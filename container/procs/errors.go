package procs

import "errors"

// Sentinel errors; wrapped with context.
var (
	// ErrNotFound: no running process has that pid or tag.
	ErrNotFound = errors.New("no such process")
	// ErrClosed: the agent is gone (closed, or its sandbox ended).
	ErrClosed = errors.New("the process agent is closed")
	// ErrStart: the command could not be started (not found, not
	// executable, a missing working directory).
	ErrStart = errors.New("the command could not be started")
	// ErrStdin: the process's stdin is closed or was not asked for.
	ErrStdin = errors.New("the process's stdin is not open")
	// ErrNotPty: a terminal's operation (Resize) on a process started
	// without one, or closing a terminal's stdin (send Ctrl-D instead).
	ErrNotPty = errors.New("the terminal operation was refused")
	// ErrSlow: the subscriber did not read its events for SlowTimeout and
	// was dropped; the process goes on.
	ErrSlow = errors.New("the subscriber fell behind the process's output and was dropped")
	// ErrWatchEnded: the watch was closed, or its directory went.
	ErrWatchEnded = errors.New("the watch ended")
	// ErrProtocol: the agent sent something that is not a valid frame.
	ErrProtocol = errors.New("process agent protocol error")
)
