package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
)

// Sentinel errors; wrapped with context and translated to a status once, in
// writeError.
var (
	// ErrShuttingDown: the daemon is draining and takes no new runs.
	ErrShuttingDown = errors.New("the nsbox daemon is shutting down; retry against the next instance")
	// ErrBusy: every run slot and queue place is taken.
	ErrBusy = errors.New("too many runs in flight and queued; retry later or raise --max-concurrent/--queue")
	// ErrRootfsNotFound: the named root filesystem is not in the store.
	ErrRootfsNotFound = errors.New("rootfs not found; list them with GET /v1/info or build one with `nsbox rootfs build`")
	// ErrNotFound: no such route.
	ErrNotFound = errors.New("no such endpoint")
	// ErrMethodNotAllowed: the route exists with another method.
	ErrMethodNotAllowed = errors.New("method not allowed")
	// ErrBrowserRequest: the request carries Origin or Referer.
	ErrBrowserRequest = errors.New("requests carrying Origin or Referer are refused: the nsbox API is not for browsers")
	// ErrMediaType: the body is not JSON.
	ErrMediaType = errors.New("the request body must be application/json")
)

// FieldError is a request that is well-formed JSON but wrong; Field names
// the offending field in JSON path form ("limits.memory_bytes", "files[2].path").
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

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// retryAfterSeconds is the Retry-After hint sent with 429 and 503.
const retryAfterSeconds = 1

// apiError translates err to a status and wire error. It is the only place
// that maps errors to statuses.
func apiError(err error) (int, *agentapi.Error) {
	var (
		fe  *FieldError
		mbe *http.MaxBytesError
		ae  *agentapi.Error
	)
	switch {
	case errors.As(err, &ae):
		st := ae.Status
		if st == 0 {
			st = http.StatusInternalServerError
		}
		return st, &agentapi.Error{Code: ae.Code, Message: ae.Message}
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, &agentapi.Error{Code: agentapi.CodePayloadTooLarge,
			Message: fmt.Sprintf("request body larger than %d bytes", mbe.Limit)}
	case errors.As(err, &fe), errors.Is(err, container.ErrInvalidSpec):
		return http.StatusBadRequest, &agentapi.Error{Code: agentapi.CodeInvalidArgument, Message: err.Error()}
	case errors.Is(err, ErrRootfsNotFound):
		return http.StatusBadRequest, &agentapi.Error{Code: agentapi.CodeInvalidArgument, Message: err.Error()}
	case errors.Is(err, ErrBrowserRequest):
		return http.StatusForbidden, &agentapi.Error{Code: agentapi.CodeForbidden, Message: err.Error()}
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound, &agentapi.Error{Code: agentapi.CodeNotFound, Message: err.Error()}
	case errors.Is(err, ErrMethodNotAllowed):
		return http.StatusMethodNotAllowed, &agentapi.Error{Code: agentapi.CodeMethodNotAllowed, Message: err.Error()}
	case errors.Is(err, ErrMediaType):
		return http.StatusUnsupportedMediaType, &agentapi.Error{Code: agentapi.CodeUnsupportedMediaType, Message: err.Error()}
	case errors.Is(err, ErrBusy):
		return http.StatusTooManyRequests, &agentapi.Error{Code: agentapi.CodeResourceExhausted, Message: err.Error()}
	case errors.Is(err, ErrShuttingDown):
		return http.StatusServiceUnavailable, &agentapi.Error{Code: agentapi.CodeUnavailable, Message: err.Error()}
	default:
		return http.StatusInternalServerError, &agentapi.Error{Code: agentapi.CodeInternal, Message: err.Error()}
	}
}

// writeError writes err as a JSON error body with its status.
func writeError(w http.ResponseWriter, err error) {
	status, ae := apiError(err)
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Connection", "close")
	}
	writeJSON(w, status, agentapi.ErrorBody{Error: ae})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", agentapi.ContentTypeJSON)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
