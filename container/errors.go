package container

import "errors"

// Sentinel errors; wrapped with context by the engine.
var (
	ErrInvalidSpec = errors.New("invalid spec")
	ErrNotRoot     = errors.New("the sandbox engine must run as root")
	ErrNoUIDs      = errors.New("no free host uid slot")
	ErrInvalidPath = errors.New("invalid workspace path")
	ErrNotExist    = errors.New("no such file in the workspace")
	ErrNotRegular  = errors.New("not a regular file")
	ErrTooLarge    = errors.New("file too large")
)
