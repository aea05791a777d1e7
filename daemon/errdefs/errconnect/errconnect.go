// Package errconnect maps the error classes of package errdefs to
// Connect (gRPC) codes, for E2B's envd (containerd's errdefs/pkg/errgrpc).
// The SDKs turn the codes into their error classes (NotFoundError,
// InvalidArgumentError, ...).
package errconnect

import (
	"errors"

	"connectrpc.com/connect"

	"github.com/nsbox/nsbox/daemon/errdefs"
)

// mapping is every class's code, by gRPC's meanings. ErrExists is
// FailedPrecondition, not AlreadyExists: the SDKs' makeDir answers
// AlreadyExists with "false" (the directory is there), which a file in
// the way is not.
var mapping = map[error]connect.Code{
	errdefs.ErrInvalidArgument: connect.CodeInvalidArgument,
	errdefs.ErrNotFound:        connect.CodeNotFound,
	errdefs.ErrSessionDead:     connect.CodeFailedPrecondition,
	errdefs.ErrSessionBusy:     connect.CodeAborted, // a concurrency conflict: retry the whole call later
	errdefs.ErrSessionParked:   connect.CodeFailedPrecondition,
	errdefs.ErrExists:          connect.CodeFailedPrecondition,
	errdefs.ErrInUse:           connect.CodeFailedPrecondition,
	errdefs.ErrTooLarge:        connect.CodeResourceExhausted,
	errdefs.ErrExhausted:       connect.CodeResourceExhausted,
	errdefs.ErrNoSpace:         connect.CodeResourceExhausted,
	errdefs.ErrUnavailable:     connect.CodeUnavailable,
}

// Code returns err's Connect code: its class's, else CodeInternal.
func Code(err error) connect.Code {
	if c, ok := mapping[errdefs.Class(err)]; ok {
		return c
	}
	return connect.CodeInternal
}

// ToConnect returns err as a *connect.Error of its class's code; nil
// stays nil and a *connect.Error is returned as it is.
func ToConnect(err error) error {
	if err == nil {
		return nil
	}
	if ce := (*connect.Error)(nil); errors.As(err, &ce) {
		return err
	}
	return connect.NewError(Code(err), err)
}
