package daemon

import (
	"errors"
	"fmt"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/session"
	"github.com/nsbox/nsbox/rootfs"
)

// Error classes. Every error the core returns belongs to at most one of
// them (errors.Is); a transport maps each class to its own status once
// (agentapi/server's ToHTTP). An error of no class is internal.
var (
	ErrInvalidArgument = errors.New("invalid argument")
	ErrNotFound        = errors.New("not found")
	ErrConflict        = errors.New("conflict") // the session died; GET it for the reason
	ErrTooLarge        = errors.New("too large")
	ErrExhausted       = errors.New("resource exhausted")
	ErrUnavailable     = errors.New("unavailable")
)

// Specific errors, each of a class.
var (
	// ErrShuttingDown: the daemon is draining and takes no new runs.
	ErrShuttingDown = classed(ErrUnavailable, "the nsbox daemon is shutting down; retry against the next instance")
	// ErrBusy: every run slot and queue place is taken.
	ErrBusy = classed(ErrExhausted, "too many runs in flight and queued; retry later or raise --max-concurrent/--queue")
	// ErrRootfsNotFound: the named root filesystem is not in the store.
	ErrRootfsNotFound = classed(ErrInvalidArgument, "rootfs not found; list them with GET /v1/info or build one with `nsbox rootfs build`")
	// ErrNoSessions: the daemon has no Starter, so it cannot keep sandboxes.
	ErrNoSessions = classed(ErrUnavailable, "sessions need a Starter that can start sandboxes (a *container.Engine)")
)

// classError is an error that belongs to a class: its message is its own.
type classError struct {
	msg   string
	class error
}

func classed(class error, msg string) error { return &classError{msg: msg, class: class} }

func (e *classError) Error() string { return e.msg }
func (e *classError) Unwrap() error { return e.class }

// inClass keeps err's message and adds class to what it Is.
type inClass struct {
	err, class error
}

func (e *inClass) Error() string   { return e.err.Error() }
func (e *inClass) Unwrap() []error { return []error{e.err, e.class} }

// classify gives the engine's, the sessions' and the store's errors their
// class. It is the one place that knows those packages' sentinels.
func classify(err error) error {
	var class error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, session.ErrNotFound), errors.Is(err, container.ErrNotExist):
		class = ErrNotFound
	case errors.Is(err, session.ErrTooMany):
		class = ErrExhausted
	case errors.Is(err, session.ErrDead):
		class = ErrConflict
	case errors.Is(err, session.ErrClosed):
		return fmt.Errorf("%w: %w", err, ErrShuttingDown)
	case errors.Is(err, container.ErrInvalidSpec), errors.Is(err, container.ErrInvalidPath),
		errors.Is(err, container.ErrNotRegular), errors.Is(err, rootfs.ErrNotFound):
		class = ErrInvalidArgument
	case errors.Is(err, container.ErrTooLarge):
		class = ErrTooLarge
	default:
		return err
	}
	return &inClass{err: err, class: class}
}

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

// FieldErrorf returns a *FieldError; transports use it for their decoding
// errors so that every invalid request reads the same.
func FieldErrorf(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

var fieldErr = FieldErrorf
