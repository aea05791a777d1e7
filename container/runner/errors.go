package runner

import (
	"errors"

	"github.com/nsbox/nsbox/container/internal/frame"
)

// Sentinel errors; wrapped with context.
var (
	// ErrDead: the interpreter or its sandbox is gone (OOM, crash, kill,
	// Close); start a new runner.
	ErrDead = errors.New("the runner is no longer running; start a new one")
	// ErrUnsupported: the runner's language does not do this (a
	// TypeScript cell in Python, processes beside a Node runner).
	ErrUnsupported = errors.New("not supported by this runner's language")
	// ErrProtocol: the runner sent something that is not a valid frame.
	ErrProtocol = errors.New("runner protocol error")
	// ErrFrameTooLarge: a frame's length is above MaxFrameBytes.
	ErrFrameTooLarge = frame.ErrTooLarge
	// ErrState: a snapshot or restore of a Python runner's state failed
	// (the reason follows: over its cap, an interrupt, a bad blob).
	ErrState = errors.New("the session state could not be carried")
	// ErrStateTooLarge: a snapshot passed its cap (with ErrState).
	ErrStateTooLarge = errors.New("the session state is too large")
	// ErrStateBusy: the kernel would not seal a state's memfd (EBUSY:
	// a page of it held elsewhere) however often it was asked (with
	// ErrState). Transient: the session is unharmed; retry.
	ErrStateBusy = errors.New("the session state's memory is held by the kernel for now; retry")
)
