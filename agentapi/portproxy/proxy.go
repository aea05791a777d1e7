// Package portproxy serves HTTP to a server in a sandbox, over a
// connection the core has made to the sandbox's port (daemon/ports): a
// reverse proxy (net/http/httputil) that passes requests and their
// streaming bodies, server-sent events as they come, and WebSocket (any
// Upgrade) connections both ways. It is the transports' one proxy: /v1's
// port routes and E2B's PORT-ID hosts. The connection is one per request
// and closed after it (no pool of connections into a sandbox is kept), so
// whatever happens to the sandbox's server, nothing of it outlives the
// request.
package portproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync/atomic"
)

// Target is where one request goes: the connection made to the sandbox's
// port and how the request looks to the server behind it.
type Target struct {
	Conn net.Conn
	Port int
	// Path is the request's path as the server sees it (escaped, from
	// "/"); its query is passed as it came.
	Path string
	// Host is the Host header the server sees ("": 127.0.0.1:PORT, where
	// it listens).
	Host string
	// Error answers a request that failed once the connection was made
	// (the server closed it, answered something that is not HTTP).
	Error func(w http.ResponseWriter, r *http.Request, err error)
}

// errUsed: the transport asked for a second connection, which a request
// never gets.
var errUsed = errors.New("portproxy: one connection per request")

type connKey struct{}

// oneConn hands the transport the request's connection once.
type oneConn struct {
	c    net.Conn
	used atomic.Bool
}

var transport = &http.Transport{
	DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		oc, _ := ctx.Value(connKey{}).(*oneConn)
		if oc == nil || !oc.used.CompareAndSwap(false, true) {
			return nil, errUsed
		}
		return oc.c, nil
	},
	DisableKeepAlives:  true,
	DisableCompression: true, // the body is passed as the server sent it
	MaxIdleConns:       -1,
}

// Serve proxies r to t and closes t.Conn.
func Serve(w http.ResponseWriter, r *http.Request, t Target, log *slog.Logger) {
	oc := &oneConn{c: t.Conn}
	defer func() {
		if !oc.used.Load() {
			t.Conn.Close()
		}
	}()
	path, err := url.PathUnescape(t.Path)
	if err != nil {
		path = t.Path
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", net.JoinHostPort("127.0.0.1", strconv.Itoa(t.Port))
			pr.Out.URL.Path, pr.Out.URL.RawPath = path, t.Path
			pr.Out.Host = t.Host
		},
		Transport:     transport,
		FlushInterval: -1, // events and chunks as they come
		ErrorHandler:  t.Error,
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	if rp.ErrorHandler == nil {
		rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, fmt.Sprintf("port %d: %v", t.Port, err), http.StatusBadGateway)
		}
	}
	rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), connKey{}, oc)))
}
