package server

import (
	"net/http"

	"github.com/nsbox/nsbox/agentapi/httpkit"
)

// ErrBodyTimeout: the client did not send its body in time (httpkit's).
var ErrBodyTimeout = httpkit.ErrBodyTimeout

// decode reads exactly one JSON value of a request body into v with the
// kit's strict decoder (no unknown field, no trailing data, JSON media
// type), within the body limits and budget. The caller calls release once
// it is done with v.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) (release func(), _ error) {
	return s.bodies.Decode(w, r, v, httpkit.Lenience{})
}
