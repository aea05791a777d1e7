// Package errdefs defines the classes of the errors the daemon's core
// returns (containerd's errdefs idea): every error belongs to at most one
// class (errors.Is), and each transport maps a class to its own status
// once (agentapi/server.ToHTTP). An error of no class is internal.
package errdefs

import (
	"errors"
	"fmt"
)

// The classes.
var (
	ErrInvalidArgument = errors.New("invalid argument")
	ErrNotFound        = errors.New("not found")
	ErrConflict        = errors.New("conflict") // the session died; GET it for the reason
	ErrTooLarge        = errors.New("too large")
	ErrExhausted       = errors.New("resource exhausted")
	ErrNoSpace         = errors.New("no space left") // a workspace (or volume) is full
	ErrUnavailable     = errors.New("unavailable")
	ErrInUse           = errors.New("in use") // a volume that exists already, or is mounted
)

// New returns an error of class whose message is msg alone.
func New(class error, msg string) error { return &classError{msg: msg, class: class} }

type classError struct {
	msg   string
	class error
}

func (e *classError) Error() string { return e.msg }
func (e *classError) Unwrap() error { return e.class }

// In returns err, keeping its message and what it Is, as also of class.
func In(class, err error) error { return &inClass{err: err, class: class} }

type inClass struct {
	err, class error
}

func (e *inClass) Error() string   { return e.err.Error() }
func (e *inClass) Unwrap() []error { return []error{e.err, e.class} }

// FieldError is a request that is well-formed but wrong; Field names the
// offending field in JSON path form ("limits.memory_bytes", "files[2].path").
// It is of class ErrInvalidArgument.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

func (e *FieldError) Unwrap() error { return ErrInvalidArgument }

// Field returns a *FieldError; every layer uses it for its request errors,
// so that every invalid request reads the same.
func Field(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}
