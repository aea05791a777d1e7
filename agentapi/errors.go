package agentapi

import (
	"fmt"
	"time"
)

// Error codes of the "code" field of an error body, with their HTTP status
// (daemon/errdefs/errhttp maps each error class to one; docs/API.md,
// "Errors", says what to do on each).
const (
	CodeInvalidArgument      = "invalid_argument"       // 400
	CodeForbidden            = "forbidden"              // 403
	CodeNotFound             = "not_found"              // 404
	CodeMethodNotAllowed     = "method_not_allowed"     // 405
	CodeRequestTimeout       = "request_timeout"        // 408: the body did not arrive in time
	CodeSessionDead          = "session_dead"           // 409: the session died (OOM, crash); GET it for the reason
	CodeSessionBusy          = "session_busy"           // 409: the session runs an exec; retry when it is over
	CodeSessionParked        = "session_parked"         // 409: the session is parked; an exec or a revive brings it back
	CodeExists               = "exists"                 // 409: the name is taken, or a file of another kind is in the way
	CodeInUse                = "in_use"                 // 409: the volume is mounted by a live sandbox
	CodePayloadTooLarge      = "payload_too_large"      // 413
	CodeUnsupportedMediaType = "unsupported_media_type" // 415
	CodeResourceExhausted    = "resource_exhausted"     // 429
	CodeInternal             = "internal"               // 500
	CodeBadGateway           = "bad_gateway"            // 502: nothing listens on a session's port
	CodeUnavailable          = "unavailable"            // 503
	CodeNoSpace              = "no_space"               // 507: a workspace is full
)

// ErrorBody is the JSON body of every non-2xx response:
// {"error": {"code": "...", "message": "..."}}.
type ErrorBody struct {
	Error *Error `json:"error"`
}

// Error is an API error. Clients get it back as a Go error
// (errors.As(err, new(*agentapi.Error))).
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`

	// Status is the HTTP status the error came with (client side only).
	Status int `json:"-"`
	// RetryAfter is the server's Retry-After hint on 429 and 503 (client side only).
	RetryAfter time.Duration `json:"-"`
	// Class is the daemon/errdefs class of Code, so that a client's
	// errors.Is(err, errdefs.ErrSessionBusy) works (client side only: the
	// Go client sets it by errhttp.FromCode).
	Class error `json:"-"`
}

// Unwrap returns the error's class, nil when it has none.
func (e *Error) Unwrap() error { return e.Class }

func (e *Error) Error() string {
	return fmt.Sprintf("nsbox daemon: %s: %s", e.Code, e.Message)
}
