package agentapi

import (
	"fmt"
	"time"
)

// Error codes of the "code" field of an error body, with their HTTP status.
const (
	CodeInvalidArgument      = "invalid_argument"       // 400
	CodeForbidden            = "forbidden"              // 403
	CodeNotFound             = "not_found"              // 404
	CodeMethodNotAllowed     = "method_not_allowed"     // 405
	CodeRequestTimeout       = "request_timeout"        // 408: the body did not arrive in time
	CodePayloadTooLarge      = "payload_too_large"      // 413
	CodeUnsupportedMediaType = "unsupported_media_type" // 415
	CodeNoSpace              = "no_space"               // 507: a workspace is full
	CodeResourceExhausted    = "resource_exhausted"     // 429
	CodeInternal             = "internal"               // 500
	CodeUnavailable          = "unavailable"            // 503
	CodeSessionDead          = "session_dead"           // 409: the session died (OOM, crash); GET it for the reason
	CodeConflict             = "conflict"               // 409: the volume exists already, or is in use
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
}

func (e *Error) Error() string {
	return fmt.Sprintf("nsbox daemon: %s: %s", e.Code, e.Message)
}
