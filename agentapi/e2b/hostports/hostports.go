// Package hostports serves E2B's sandbox hosts for the ports of a
// sandbox's own servers (sandbox.getHost(port): PORT-ID.DOMAIN, or the
// E2b-Sandbox-Id and E2b-Sandbox-Port headers), once package e2b has
// routed the request and checked its credentials: the request goes to
// 127.0.0.1:PORT in the sandbox through the core (daemon/ports) and
// agentapi/portproxy, as /v1's port routes do. What E2B's proxy answers
// for a port with nothing behind it is answered here too (502, naming the
// port), and the E2B credentials are taken off the request before the
// sandbox's server sees it.
package hostports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/nsbox/nsbox/agentapi/portproxy"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/ports"
)

// Dialer is the core as the port hosts need it.
type Dialer interface {
	DialPort(ctx context.Context, id string, port int) (net.Conn, error)
}

// credentials are E2B's headers that carry a credential or route to a
// sandbox: never passed to the sandbox's server (an API key would reach
// code the key's owner does not control; a token would let the server
// act as its client).
var credentials = []string{"X-API-KEY", "X-Access-Token", "E2B-Traffic-Access-Token", "E2b-Sandbox-Id", "E2b-Sandbox-Port", "Authorization"}

// answer is E2B's proxy's error body.
type answer struct {
	SandboxID string `json:"sandboxId"`
	Message   string `json:"message"`
	Port      int    `json:"port,omitempty"`
	Code      int    `json:"code"`
}

// Serve proxies r to port of sandbox id, whose caller is authorized.
func Serve(w http.ResponseWriter, r *http.Request, d Dialer, id string, port int, log *slog.Logger) {
	c, err := d.DialPort(r.Context(), id, port)
	if err != nil {
		writeErr(w, id, port, err)
		return
	}
	for _, h := range credentials {
		r.Header.Del(h)
	}
	path := r.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	portproxy.Serve(w, r, portproxy.Target{Conn: c, Port: port, Path: path, Host: r.Host,
		Error: func(w http.ResponseWriter, _ *http.Request, err error) {
			log.Debug("e2b: port proxy", "sandbox", id, "port", port, "err", err)
			write(w, answer{SandboxID: id, Port: port, Code: http.StatusBadGateway,
				Message: fmt.Sprintf("The sandbox's server on port %d closed the connection without an HTTP answer", port)})
		}}, log)
}

func writeErr(w http.ResponseWriter, id string, port int, err error) {
	a := answer{SandboxID: id, Port: port, Code: http.StatusBadGateway}
	switch {
	case errors.Is(err, ports.ErrNoListener):
		a.Message = fmt.Sprintf("The sandbox is running but there is no service running on port %d", port)
	case errors.Is(err, errdefs.ErrNotFound), errors.Is(err, errdefs.ErrSessionDead), errors.Is(err, errdefs.ErrSessionParked):
		a.Message, a.Port = "The sandbox is not running", 0
	case errors.Is(err, errdefs.ErrInvalidArgument):
		a.Code, a.Message = http.StatusBadRequest, err.Error()
	default:
		a.Code, a.Message = http.StatusInternalServerError, err.Error()
	}
	write(w, a)
}

func write(w http.ResponseWriter, a answer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.Code)
	_ = json.NewEncoder(w).Encode(a)
}

// Route reads a Host of the form PORT-ID.DOMAIN (E2B's sandbox hosts).
func Route(host string) (port, id string) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	first, _, ok := strings.Cut(host, ".")
	if !ok {
		return "", ""
	}
	port, id, ok = strings.Cut(first, "-")
	if !ok || port == "" || id == "" || strings.Trim(port, "0123456789") != "" {
		return "", ""
	}
	return port, id
}
