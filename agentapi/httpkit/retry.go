package httpkit

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/nsbox/nsbox/daemon/admission"
)

// retryAfterSeconds is the Retry-After hint sent with 429 and 503 when the
// core gives none (a full run queue gives its own, see admission.BusyError).
const retryAfterSeconds = 1

// RetryAfter sets the Retry-After header of an answer with status to err:
// on 429 and 503 only, with the core's estimate when err carries one
// (*admission.BusyError), else 1 s. The clients (nsbox's and the E2B SDKs)
// retry within their request timeout when it is there.
func RetryAfter(w http.ResponseWriter, status int, err error) {
	if status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable {
		return
	}
	retry := retryAfterSeconds
	if be := (*admission.BusyError)(nil); errors.As(err, &be) {
		retry = max(1, int(be.RetryAfter.Seconds()))
	}
	w.Header().Set("Retry-After", strconv.Itoa(retry))
}
