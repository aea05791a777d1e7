package egress

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nsbox/nsbox/daemon/egress/pkgcache"
)

// dialTimeout bounds a dial upstream; a sandbox waiting longer learns
// nothing more.
const dialTimeout = 5 * time.Second

// Proxy is one sandbox's forward proxy.
type Proxy struct {
	opts      *Options
	runID     string
	policy    Policy
	log       *slog.Logger
	hostAddrs []netip.Addr
	// placeholders are the values a sandbox holds in place of its
	// secrets, by secret name; fresh for every Proxy.
	placeholders map[string]string

	srv       *http.Server
	rp        *httputil.ReverseProxy
	transport *http.Transport
	ctx       context.Context
	cancel    context.CancelFunc

	bytes  atomic.Int64   // both directions, all records: MaxBytes
	hashes pkgcache.Index // package files' hashes, from the pages this proxy forwarded

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{} // hijacked and upstream, for Close
	report Report
	wg     sync.WaitGroup // handlers
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// New makes the proxy of run runID under policy p.
func New(opts *Options, runID string, p Policy) (*Proxy, error) {
	if opts == nil {
		opts = &Options{}
	}
	if p.MaxConnections < 0 || p.MaxBytes < 0 {
		return nil, fmt.Errorf("%w: negative cap", ErrInvalidPolicy)
	}
	if (len(p.Secrets) > 0 || len(opts.Intercept) > 0) && opts.CA == nil {
		return nil, ErrNoCA
	}
	px := &Proxy{
		opts: opts, runID: runID, policy: p, log: opts.Log,
		hostAddrs:    opts.HostAddrs,
		placeholders: map[string]string{},
		conns:        map[net.Conn]struct{}{},
	}
	for _, s := range p.Secrets {
		if !envName.MatchString(s.Name) || s.Value == "" || len(s.Hosts) == 0 {
			return nil, fmt.Errorf("%w: secret %q needs an environment-variable name, a value and hosts", ErrInvalidPolicy, s.Name)
		}
		if _, dup := px.placeholders[s.Name]; dup {
			return nil, fmt.Errorf("%w: secret %q named twice", ErrInvalidPolicy, s.Name)
		}
		for _, h := range s.Hosts {
			if !h.Within(p.Allow) {
				return nil, fmt.Errorf("%w: secret %q is bound to %s, which network.allow does not allow", ErrInvalidPolicy, s.Name, h)
			}
		}
		px.placeholders[s.Name] = "nsbox-secret-" + hex.EncodeToString(randBytes(16))
	}
	if px.log == nil {
		px.log = slog.New(slog.DiscardHandler)
	}
	if px.hostAddrs == nil {
		px.hostAddrs = hostAddrs()
	}
	px.ctx, px.cancel = context.WithCancel(context.Background())
	px.transport = &http.Transport{
		DialContext:         px.dialChecked,
		TLSClientConfig:     tlsClientConfig(opts.RootCAs),
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
	}
	px.rp = &httputil.ReverseProxy{
		Rewrite:      rewrite,
		Transport:    roundTripper(px.roundTrip),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) { px.writeError(w, err) },
		ErrorLog:     log.New(io.Discard, "", 0),
		BufferPool:   bufferPool{},
	}
	px.srv = &http.Server{
		Handler:           http.HandlerFunc(px.serveHTTP),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return px.ctx },
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	return px, nil
}

// Serve answers the sandbox on l until l or the proxy is closed.
func (p *Proxy) Serve(l net.Listener) error {
	err := p.srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close closes the listener and every connection, waits for the handlers
// and returns what the proxy saw.
func (p *Proxy) Close() Report {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.cancel()
	p.srv.Close()
	p.wg.Wait()
	p.transport.CloseIdleConnections()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.report
}

func (p *Proxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		// Not the empty 200 a returning handler gives: to a CONNECT
		// that would read as a tunnel.
		writeText(w, http.StatusServiceUnavailable, "nsbox egress: the proxy is closing")
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	p.forward(w, r)
}

// admit counts an allowed connection against MaxConnections.
func (p *Proxy) admit() *refusal {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := p.policy.MaxConnections; n > 0 && p.report.Connections >= n {
		reason := fmt.Sprintf("connection cap of %d reached", n)
		if p.report.Capped == "" {
			p.report.Capped = reason
		}
		return &refusal{http.StatusForbidden, reason}
	}
	p.report.Connections++
	return nil
}

func (p *Proxy) setCapped(reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.report.Capped == "" {
		p.report.Capped = reason
	}
}

// finish adds a record to the report, logs a refused one and hands it to
// OnRecord.
func (p *Proxy) finish(rec *Record) {
	p.mu.Lock()
	p.report.Records = append(p.report.Records, *rec)
	p.report.BytesSent += rec.Sent
	p.report.BytesReceived += rec.Received
	if !rec.Allowed {
		p.report.Refused++
	}
	p.mu.Unlock()
	if !rec.Allowed || rec.Reason != "" {
		p.log.Info("egress refused", "run", p.runID, "method", rec.Method, "host", rec.Host, "port", rec.Port, "reason", rec.Reason)
	}
	if p.opts.OnRecord != nil {
		p.opts.OnRecord(p.runID, *rec)
	}
}

// track keeps c for Close to end; the returned func forgets it.
func (p *Proxy) track(c net.Conn) (untrack func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
	}
	p.conns[c] = struct{}{}
	return func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}
}

// dial connects to a checked address.
func (p *Proxy) dial(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	c, err := d.DialContext(ctx, "tcp", addr.String())
	if err != nil {
		return nil, fmt.Errorf("cannot connect to %s: %w", addr, err)
	}
	return c, nil
}

// Env is the environment a sandbox needs to use the proxy at proxyAddr:
// the proxy variables in the spellings tools read (curl reads only the
// lowercase http_proxy), each secret's placeholder under the secret's
// name, and when the policy has secrets the CA bundle at caBundlePath
// (where the caller puts CABundle) for Python, pip, requests and Node.
func (p *Proxy) Env(proxyAddr, caBundlePath string) []string {
	u := "http://" + proxyAddr
	env := []string{
		"HTTP_PROXY=" + u, "HTTPS_PROXY=" + u, "ALL_PROXY=" + u,
		"http_proxy=" + u, "https_proxy=" + u, "all_proxy=" + u,
		"NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1",
		"npm_config_proxy=" + u, "npm_config_https_proxy=" + u,
	}
	for _, s := range p.policy.Secrets {
		env = append(env, s.Name+"="+p.placeholders[s.Name])
	}
	if p.terminates() && caBundlePath != "" {
		for _, k := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "PIP_CERT"} {
			env = append(env, k+"="+caBundlePath)
		}
	}
	return env
}

// terminates says whether the proxy may terminate this sandbox's TLS:
// it has secrets, or one of its rules may reach a host intercepted for
// the package cache.
func (p *Proxy) terminates() bool {
	if len(p.policy.Secrets) > 0 {
		return true
	}
	for _, r := range p.policy.Allow {
		for _, i := range p.opts.Intercept {
			if r.overlaps(i) {
				return true
			}
		}
	}
	return false
}

// intercepts says whether host:port is terminated for the cache.
func (p *Proxy) intercepts(host string, port int) bool {
	if p.opts.Cache == nil {
		return false
	}
	for _, r := range p.opts.Intercept {
		if r.Matches(host, port) {
			return true
		}
	}
	return false
}

// systemRoots is the host's bundle, which the sandbox keeps trusting for
// the hosts the proxy does not terminate.
const systemRoots = "/etc/ssl/certs/ca-certificates.crt"

// CABundle is the PEM a sandbox should trust when the proxy may terminate
// its TLS (the host's roots and the daemon's CA), nil otherwise.
func (p *Proxy) CABundle() []byte {
	if !p.terminates() {
		return nil
	}
	b, _ := os.ReadFile(systemRoots)
	if len(b) > 0 && b[len(b)-1] != '\n' {
		b = append(b, '\n')
	}
	return append(b, p.opts.CA.CertPEM()...)
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand since Go 1.24)
	return b
}

// bufferPool lends the copies (ReverseProxy's, splice's) 256 KiB buffers
// instead of io.Copy's 32 KiB: a 100 MiB download through the proxy went
// from 0.55x to 0.85x of direct loopback throughput (bench_test.go).
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { return new([256 << 10]byte) }}

func (bufferPool) Get() []byte  { return buffers.Get().(*[256 << 10]byte)[:] }
func (bufferPool) Put(b []byte) { buffers.Put((*[256 << 10]byte)(b)) }
