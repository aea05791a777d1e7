package container

import (
	"errors"

	"github.com/nsbox/nsbox/container/internal/locks"
	"github.com/nsbox/nsbox/container/workspace"
)

// Sentinel errors; wrapped with context by the engine.
var (
	ErrInvalidSpec = errors.New("invalid spec")
	ErrNotRoot     = errors.New("the sandbox engine must run as root")
	ErrNoUIDs      = locks.ErrNoUIDs
	ErrInvalidPath = workspace.ErrInvalidPath
	ErrNotExist    = workspace.ErrNotExist
	ErrNotRegular  = workspace.ErrNotRegular
	ErrTooLarge    = workspace.ErrTooLarge
	ErrExist       = workspace.ErrExist
	ErrNotDir      = workspace.ErrNotDir
	ErrFull        = workspace.ErrFull
	// ErrBadCommand: the kernel refused to execute the spec's argv[0]
	// (no such file, not executable, a directory, not a program): the
	// run's mistake, not the engine's. The error is also an *ExecError.
	ErrBadCommand = errors.New("the command cannot be executed")
)
