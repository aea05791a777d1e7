package e2b

import (
	"encoding/json"
	"net/http"

	"github.com/nsbox/nsbox/agentapi/httpkit"
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

// statusOf is err's HTTP status on this endpoint's REST routes:
// httpkit.ToHTTP, as on /v1, so the two never differ.
func statusOf(err error) int {
	st, _ := httpkit.ToHTTP(err)
	return st
}

func writeErr(w http.ResponseWriter, err error) {
	st := statusOf(err)
	// The SDKs retry a 429 that says when, within their request timeout
	// (a full run queue says; a full session table: 1 s).
	httpkit.RetryAfter(w, st, err)
	writeAPIError(w, st, err.Error())
}

// lenient is what the E2B SDKs may send beside what nsbox reads: fields
// it does not implement (dropped), no body on a POST, and any
// Content-Type. Anything else is decoded as strictly as on /v1.
var lenient = httpkit.Lenience{UnknownFields: true, Empty: true, AnyMediaType: true}

// decode reads a JSON body into v within the body limits and budget
// (httpkit); an empty body leaves v as it is. The caller calls release
// once it is done with v.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) (release func(), _ error) {
	return s.bodies.Decode(w, r, v, lenient)
}
