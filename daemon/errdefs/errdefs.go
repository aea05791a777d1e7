// Package errdefs defines the classes of the errors the daemon's core
// returns (containerd's errdefs idea): every error belongs to at most one
// class (errors.Is), and each protocol maps every class to its own code
// once, in a package next to this one: errhttp (the /v1 API and E2B's
// REST routes) and errconnect (E2B's envd). An error of no class is
// internal.
package errdefs

import (
	"errors"
	"fmt"
)

// The classes. Each says what happened, so that a client can decide what
// to do from the class alone: a dead session is gone for good, a busy one
// is not (retry when its exec is over), a parked one wants reviving.
var (
	ErrInvalidArgument = errors.New("invalid argument")
	ErrNotFound        = errors.New("not found")
	// ErrSessionDead: the session died (OOM, crash, its lifetime); GET it
	// for the reason. Nothing but deleting it is left to do.
	ErrSessionDead = errors.New("session dead")
	// ErrSessionBusy: the session is running an exec, and the operation
	// (pause, fork, park) does not wait for it; retry once it is over.
	ErrSessionBusy = errors.New("session busy")
	// ErrSessionParked: the session is parked (on disk, no sandbox); an
	// exec or a revive brings it back.
	ErrSessionParked = errors.New("session parked")
	// ErrExists: what the request would create exists already (a volume's
	// name), or a file of another kind is in the way (a directory where a
	// file goes, a file where a directory goes).
	ErrExists   = errors.New("already exists")
	ErrInUse    = errors.New("in use") // a volume that a live sandbox mounts
	ErrTooLarge = errors.New("too large")
	// ErrExhausted: a daemon-wide resource is used up (run slots and queue
	// places, sessions); retry later. (Not daemon.ErrBusy, which is one
	// error of this class.)
	ErrExhausted   = errors.New("resource exhausted")
	ErrNoSpace     = errors.New("no space left") // a workspace (or volume) is full
	ErrUnavailable = errors.New("unavailable")
)

// Classes returns every class, for the protocol mappings' tests: a class
// added here and not to a mapping fails them.
func Classes() []error {
	return []error{
		ErrInvalidArgument, ErrNotFound,
		ErrSessionDead, ErrSessionBusy, ErrSessionParked, ErrExists, ErrInUse,
		ErrTooLarge, ErrExhausted, ErrNoSpace, ErrUnavailable,
	}
}

// Class returns the class of err, or nil for an error of no class
// (internal).
func Class(err error) error {
	for _, c := range Classes() {
		if errors.Is(err, c) {
			return c
		}
	}
	return nil
}

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
