package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/httpkit"
)

// Errors of the HTTP layer itself; the core's are classed in package daemon.
var (
	// ErrNotFound: no such route.
	ErrNotFound = errors.New("no such endpoint")
	// ErrMethodNotAllowed: the route exists with another method.
	ErrMethodNotAllowed = errors.New("method not allowed")
	// ErrBrowserRequest: the request carries Origin or Referer.
	ErrBrowserRequest = errors.New("requests carrying Origin or Referer are refused: the nsbox API is not for browsers")
	// ErrMediaType: the body is not JSON.
	ErrMediaType = httpkit.ErrMediaType
)

// httpErrors maps the /v1 server's own errors to their status and wire
// code; the kit's go through httpkit.Status and the core's classes through
// errhttp, both shared with E2B's REST routes.
var httpErrors = []struct {
	err    error
	status int
	code   string
}{
	{ErrBrowserRequest, http.StatusForbidden, agentapi.CodeForbidden},
	{ErrNotFound, http.StatusNotFound, agentapi.CodeNotFound},
	{ErrMethodNotAllowed, http.StatusMethodNotAllowed, agentapi.CodeMethodNotAllowed},
}

// ToHTTP translates err to a status and wire error: the server's own
// errors here, the rest by httpkit.ToHTTP (the kit's, then the core's
// classes by errhttp).
func ToHTTP(err error) (int, *agentapi.Error) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return http.StatusRequestEntityTooLarge, &agentapi.Error{Code: agentapi.CodePayloadTooLarge,
			Message: fmt.Sprintf("request body larger than %d bytes (%d MiB), the daemon's cap on one request: send big inputs as several session file uploads (PUT /v1/sessions/{id}/files/PATH, one per file), each under it", mbe.Limit, mbe.Limit>>20)}
	}
	for _, e := range portErrors {
		if errors.Is(err, e) {
			return http.StatusBadGateway, &agentapi.Error{Code: agentapi.CodeBadGateway, Message: err.Error()}
		}
	}
	for _, e := range httpErrors {
		if errors.Is(err, e.err) {
			return e.status, &agentapi.Error{Code: e.code, Message: err.Error()}
		}
	}
	status, code := httpkit.ToHTTP(err)
	return status, &agentapi.Error{Code: code, Message: err.Error()}
}

// writeError writes err as a JSON error body with its status.
func writeError(w http.ResponseWriter, err error) {
	status, ae := ToHTTP(err)
	if rec, ok := w.(*statusRecorder); ok {
		rec.err = ae
	}
	httpkit.RetryAfter(w, status, err)
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Connection", "close")
	}
	writeJSON(w, status, agentapi.ErrorBody{Error: ae})
}

// writeJSON writes v as a JSON answer with status, within the server's
// write deadline (writeTimeout): a client that does not take it has its
// connection closed, and the answer's memory is freed.
func writeJSON(w http.ResponseWriter, status int, v any) {
	if d := bigJSON(v); d != nil {
		w.Header().Set("Content-Type", agentapi.ContentTypeJSON)
		w.Header().Set("Content-Length", strconv.FormatInt(d.Len()+1, 10))
		w.WriteHeader(status)
		_ = httpkit.WriteFrom(w, writeTimeout(w), d.Len()+1, newlineAfter{d})
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(agentapi.ErrorBody{Error: &agentapi.Error{Code: agentapi.CodeInternal, Message: err.Error()}})
		status = http.StatusInternalServerError
	}
	b = append(b, '\n')
	w.Header().Set("Content-Type", agentapi.ContentTypeJSON)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_ = httpkit.WriteAll(w, writeTimeout(w), b)
}

// newlineAfter writes its document and a newline, as writeJSON ends every
// answer.
type newlineAfter struct{ d io.WriterTo }

func (n newlineAfter) WriteTo(w io.Writer) (int64, error) {
	k, err := n.d.WriteTo(w)
	if err != nil {
		return k, err
	}
	_, err = w.Write([]byte{'\n'})
	return k + 1, err
}

// writeTimeout is the server's write timeout, which its middleware's
// writer carries (zero, httpkit's default, for another writer).
func writeTimeout(w http.ResponseWriter) time.Duration {
	if rec, ok := w.(*statusRecorder); ok {
		return rec.writeTimeout
	}
	return 0
}
