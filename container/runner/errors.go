package runner

import (
	"errors"

	"github.com/nsbox/nsbox/container/internal/frame"
)

// Sentinel errors; wrapped with context.
var (
	// ErrDead: the interpreter or its sandbox is gone (OOM, crash, kill,
	// Close); start a new runner.
	ErrDead = errors.New("the Python runner is no longer running; start a new one")
	// ErrProtocol: the runner sent something that is not a valid frame.
	ErrProtocol = errors.New("runner protocol error")
	// ErrFrameTooLarge: a frame's length is above MaxFrameBytes.
	ErrFrameTooLarge = frame.ErrTooLarge
)
