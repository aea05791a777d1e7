package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// forward proxies one plain-HTTP request, which is one record.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request) {
	rec := &Record{Method: r.Method}
	defer p.finish(rec)
	if !r.URL.IsAbs() || r.URL.Scheme != "http" {
		rec.Reason = "not an absolute http:// URL"
		writeText(w, http.StatusBadRequest, "nsbox egress: this is a proxy; it forwards only absolute http:// URLs (https:// goes through CONNECT)")
		return
	}
	rec.Host, rec.Port = normHost(r.URL.Hostname()), 80
	if ps := r.URL.Port(); ps != "" {
		port, err := strconv.Atoi(ps)
		if err != nil || port < 1 || port > 65535 {
			rec.Reason = "bad port"
			writeText(w, http.StatusBadRequest, "nsbox egress: bad port in "+r.URL.Host)
			return
		}
		rec.Port = port
	}
	addr, ref := p.check(r.Context(), rec.Host, rec.Port)
	for _, s := range p.policy.Secrets { // swapped where TLS is terminated only: forwarded, the upstream would get the placeholder
		if ref == nil && slices.ContainsFunc(s.Hosts, func(h Rule) bool { return h.matchesHost(rec.Host) }) &&
			strings.Contains(fmt.Sprint(r.URL, r.Header), p.placeholders[s.Name]) {
			ref = &refusal{http.StatusForbidden, "secrets are swapped on HTTPS only; this plain-HTTP request carries the placeholder of " + s.Name + ": use https://" + rec.Host}
		}
	}
	if ref == nil {
		ref = p.admit()
	}
	if ref != nil {
		rec.Reason = ref.reason
		writeText(w, ref.code, "nsbox egress: "+ref.reason)
		return
	}
	rec.Allowed, rec.Addr = true, addr.String()
	fc := &flowCtx{f: &flow{p: p}, addr: addr, rec: rec}
	defer fc.f.done(rec)
	// The request line and headers carry data too (a URL can hold
	// anything): they count as sent, bodies are counted as they flow.
	if _, err := fc.f.take(headSize(r), true); err != nil {
		rec.Reason = err.Error()
		writeText(w, http.StatusForbidden, err.Error())
		return
	}
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), flowKey{}, fc)))
}

// flowCtx travels in a request's context from the handler to the
// Transport's dial: the checked address, the record and its counters.
type flowCtx struct {
	f    *flow // nil: counted elsewhere
	addr netip.AddrPort
	rec  *Record
}

type flowKey struct{}

// rewrite sends the Host of the URL that was checked (net/http already
// ignores a Host header beside an absolute URL; this makes it plain that
// a shared front cannot be asked for another site) and drops the proxy's
// own headers (Proxy-Authorization, being hop-by-hop, is already gone).
func rewrite(pr *httputil.ProxyRequest) {
	pr.Out.Host = ""
	for k := range pr.Out.Header {
		if strings.HasPrefix(k, "Proxy-") {
			pr.Out.Header.Del(k)
		}
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// roundTrip sends one request upstream, counting both bodies when the
// flow counts them (terminated TLS counts its connection instead). Plain
// HTTP and the requests inside TLS the proxy terminates both come here.
func (p *Proxy) roundTrip(req *http.Request) (*http.Response, error) {
	fc, _ := req.Context().Value(flowKey{}).(*flowCtx)
	if fc == nil {
		return nil, errors.New("nsbox egress: internal error: request without a checked destination")
	}
	if fc.f != nil && req.Body != nil && req.Body != http.NoBody {
		req.Body = &countedBody{ReadCloser: req.Body, f: fc.f, sent: true}
	}
	resp, err := p.cachedRoundTrip(req, fc.rec)
	if err != nil {
		return nil, err
	}
	if fc.f != nil {
		resp.Body = &countedBody{ReadCloser: resp.Body, f: fc.f}
	}
	return resp, nil
}

// cachedRoundTrip serves a package file from the cache when the file's
// hash is known and held, fills the cache when it is known and not held,
// and learns hashes from the index pages that pass.
func (p *Proxy) cachedRoundTrip(req *http.Request, rec *Record) (*http.Response, error) {
	c := p.opts.Cache
	if c == nil || req.Method != http.MethodGet || req.Header.Get("Range") != "" {
		return p.transport.RoundTrip(req)
	}
	sum := p.hashes.Lookup(req.URL)
	if sum != "" {
		if f, size, ok := c.Get(sum); ok {
			rec.Cached = true
			return &http.Response{
				Status: "200 OK", StatusCode: http.StatusOK,
				Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header:        http.Header{"Content-Type": {"application/octet-stream"}},
				Body:          f,
				ContentLength: size,
				Request:       req,
			}, nil
		}
	}
	resp, err := p.transport.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	enc := resp.Header.Get("Content-Encoding")
	switch {
	case sum != "" && enc == "":
		resp.Body = c.Fill(resp.Body, sum)
	case sum == "": // an index page is learned from; anything else passes
		resp.Body = p.hashes.Learn(req.URL, resp.Header.Get("Content-Type"), enc, resp.Body)
	}
	return resp, nil
}

// dialChecked is the Transport's dial: it connects only to the address
// check returned for the request, whatever the URL says.
func (p *Proxy) dialChecked(ctx context.Context, _, _ string) (net.Conn, error) {
	fc, _ := ctx.Value(flowKey{}).(*flowCtx)
	if fc == nil {
		return nil, errors.New("nsbox egress: internal error: dial without a checked destination")
	}
	c, err := p.dial(ctx, fc.addr)
	if err != nil {
		return nil, err
	}
	untrack := p.track(c)
	return &untrackConn{Conn: c, untrack: untrack}, nil
}

// untrackConn forgets itself in the proxy when closed.
type untrackConn struct {
	net.Conn
	once    sync.Once
	untrack func()
}

func (c *untrackConn) Close() error {
	c.once.Do(c.untrack)
	return c.Conn.Close()
}

func tlsClientConfig(roots *x509.CertPool) *tls.Config {
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
}

// writeError answers a request the proxy could not carry out upstream.
func (p *Proxy) writeError(w http.ResponseWriter, err error) {
	msg := err.Error()
	if !strings.HasPrefix(msg, "nsbox egress:") {
		msg = "nsbox egress: " + msg
	}
	writeText(w, http.StatusBadGateway, msg)
}

// writeText is every answer the proxy makes itself: one line a person
// reading a Python traceback can act on. It is the reason phrase as well
// as the body, since urllib's HTTPError and requests' exceptions show the
// status line, not the body; net/http writes only standard phrases, so
// the connection is taken over for it (and closed after).
func writeText(w http.ResponseWriter, code int, msg string) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		defer conn.Close()
		rawResponse(conn, code, msg)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprintln(w, msg)
}

// headSize is about what r's request line and headers take on the wire.
func headSize(r *http.Request) int {
	n := len(r.Method) + len(r.URL.RequestURI()) + len(r.Proto) + 4
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n + len(r.Host) + 8
}
