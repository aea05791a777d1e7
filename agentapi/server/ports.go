package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/portproxy"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/ports"
)

// portRoutes: HTTP to a server a session runs on its sandbox's loopback,
// for the session's owner (docs/API.md "Ports").
func (s *Server) portRoutes() []route {
	p := "/" + agentapi.Version + "/sessions/{id}/ports/{port}"
	return []route{
		{"", p + "/{path...}", s.handlePort},
		{http.MethodGet, p, s.handlePortBare},
	}
}

// handlePort proxies the request, its path less the route's prefix, to
// 127.0.0.1:PORT in the session's sandbox (any method; WebSocket and
// other upgrades, server-sent events and streaming bodies pass).
func (s *Server) handlePort(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	port, err := portParam(r)
	if err != nil {
		writeError(w, err)
		return
	}
	c, err := s.core.DialPort(r.Context(), id, port)
	if err != nil {
		writeError(w, err)
		return
	}
	path := "/"
	if seg := strings.SplitN(r.URL.EscapedPath(), "/", 7); len(seg) == 7 {
		path += seg[6]
	}
	portproxy.Serve(w, r, portproxy.Target{Conn: c, Port: port, Path: path,
		Error: func(w http.ResponseWriter, _ *http.Request, err error) {
			writeError(w, fmt.Errorf("session %s: port %d: %w: %v", id, port, errBadAnswer, err))
		}}, s.log)
}

// handlePortBare: with "Upgrade: tcp", a raw TCP tunnel to the port
// (`nsbox session port`: 101, then the connection's bytes both ways);
// otherwise it sends a browser-style client to the port's root, where
// relative links resolve under the route.
func (s *Server) handlePortBare(w http.ResponseWriter, r *http.Request) {
	port, err := portParam(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if strings.EqualFold(r.Header.Get("Upgrade"), agentapi.UpgradeTCP) {
		s.tunnelPort(w, r, port)
		return
	}
	u := *r.URL
	u.Path, u.RawPath = r.URL.Path+"/", ""
	http.Redirect(w, r, u.String(), http.StatusPermanentRedirect)
}

// tunnelPort joins the request's connection to the port's.
func (s *Server) tunnelPort(w http.ResponseWriter, r *http.Request, port int) {
	c, err := s.core.DialPort(r.Context(), r.PathValue("id"), port)
	if err != nil {
		writeError(w, err)
		return
	}
	hj, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		c.Close()
		writeError(w, err)
		return
	}
	_ = hj.SetDeadline(time.Time{})
	if _, err := io.WriteString(hj, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+agentapi.UpgradeTCP+"\r\n\r\n"); err != nil {
		hj.Close()
		c.Close()
		return
	}
	portproxy.Join(hj, brw.Reader, c)
}

// errBadAnswer: the server behind a port closed the connection or
// answered something that is not HTTP.
var errBadAnswer = errors.New("no HTTP answer from the sandbox's server")

func portParam(r *http.Request) (int, error) {
	p, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || p < 1 || p > 65535 {
		return 0, errdefs.Field("port", "%q is not a TCP port (1 to 65535)", r.PathValue("port"))
	}
	return p, nil
}

// portErrors are the ports' errors as /v1 answers them: 502, naming the
// port, as a gateway answers for a server that is not there.
var portErrors = []error{ports.ErrNoListener, errBadAnswer}
