package workspace

import "errors"

// Sentinel errors, wrapped with the operation and path.
var (
	ErrInvalidPath = errors.New("invalid workspace path")
	ErrNotExist    = errors.New("no such file in the workspace")
	ErrExist       = errors.New("a file of another kind is in the way")
	ErrNotDir      = errors.New("not a directory")
	ErrNotRegular  = errors.New("not a regular file")
	ErrTooLarge    = errors.New("file too large")
	ErrFull        = errors.New("the workspace is full")
	ErrClosed      = errors.New("the workspace is gone (its sandbox has ended)")
)
