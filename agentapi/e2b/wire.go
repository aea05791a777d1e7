package e2b

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/nsbox/nsbox/daemon"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/errdefs/errhttp"
)

// apiError is the control plane's error body, as E2B's API answers.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeAPIError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, apiError{Code: status, Message: msg})
}

// statusOf is err's HTTP status on this endpoint's REST routes: the one
// table of the /v1 API too (errhttp), so the two never differ.
func statusOf(err error) int {
	st, _ := errhttp.ToHTTP(err)
	return st
}

func writeErr(w http.ResponseWriter, err error) {
	st := statusOf(err)
	if st == http.StatusTooManyRequests || st == http.StatusServiceUnavailable {
		// The SDKs retry a 429 that says when, within their request
		// timeout (a full run queue says; a full session table: 1 s).
		retry := 1
		if be := (*daemon.BusyError)(nil); errors.As(err, &be) {
			retry = max(1, int(be.RetryAfter.Seconds()))
		}
		w.Header().Set("Retry-After", strconv.Itoa(retry))
	}
	writeAPIError(w, st, err.Error())
}

// decode reads a JSON body into v; an empty body leaves v as it is.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return errdefs.Field("", "request body: %v", err)
	}
	return nil
}
