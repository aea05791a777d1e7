// Package errhttp maps the error classes of package errdefs to HTTP
// statuses and the /v1 API's wire codes (containerd's errdefs/pkg/errhttp).
// It is the one table: the /v1 server (agentapi/server.ToHTTP) and E2B's
// REST routes (agentapi/e2b) both answer through it, so a class has one
// status on every HTTP route.
package errhttp

import (
	"errors"
	"net/http"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// mapping is every class's status and wire code. The session classes and
// the two of names all answer 409, told apart by their codes.
var mapping = map[error]struct {
	status int
	code   string
}{
	errdefs.ErrInvalidArgument: {http.StatusBadRequest, agentapi.CodeInvalidArgument},
	errdefs.ErrNotFound:        {http.StatusNotFound, agentapi.CodeNotFound},
	errdefs.ErrSessionDead:     {http.StatusConflict, agentapi.CodeSessionDead},
	errdefs.ErrSessionBusy:     {http.StatusConflict, agentapi.CodeSessionBusy},
	errdefs.ErrSessionParked:   {http.StatusConflict, agentapi.CodeSessionParked},
	errdefs.ErrExists:          {http.StatusConflict, agentapi.CodeExists},
	errdefs.ErrInUse:           {http.StatusConflict, agentapi.CodeInUse},
	errdefs.ErrTooLarge:        {http.StatusRequestEntityTooLarge, agentapi.CodePayloadTooLarge},
	errdefs.ErrExhausted:       {http.StatusTooManyRequests, agentapi.CodeResourceExhausted},
	errdefs.ErrNoSpace:         {http.StatusInsufficientStorage, agentapi.CodeNoSpace},
	errdefs.ErrUnavailable:     {http.StatusServiceUnavailable, agentapi.CodeUnavailable},
}

// ToHTTP returns err's status and wire code: its class's, 413 for a body
// over an http.MaxBytesReader's limit, else 500 "internal".
func ToHTTP(err error) (status int, code string) {
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		return http.StatusRequestEntityTooLarge, agentapi.CodePayloadTooLarge
	}
	if m, ok := mapping[errdefs.Class(err)]; ok {
		return m.status, m.code
	}
	return http.StatusInternalServerError, agentapi.CodeInternal
}

// FromCode returns the class whose wire code is code, nil for a code of
// none (internal, or one of the HTTP layer's own): a client's way back
// from an answer to errors.Is (agentapi.Error.Class).
func FromCode(code string) error {
	for class, m := range mapping {
		if m.code == code {
			return class
		}
	}
	return nil
}
