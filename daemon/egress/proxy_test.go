package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// testNet is a fake internet on 127.0.0.1: names resolve through a map,
// and each test server's port is opened on purpose.
type testNet struct {
	names map[string]string
	open  []Opening
}

func (n *testNet) resolve(_ context.Context, host string) ([]netip.Addr, error) {
	a, ok := n.names[host]
	if !ok {
		return nil, fmt.Errorf("no such host %s", host)
	}
	return []netip.Addr{netip.MustParseAddr(a)}, nil
}

// serve opens s's port and returns it.
func (n *testNet) serve(t testing.TB, s *httptest.Server) int {
	t.Helper()
	ap := netip.MustParseAddrPort(s.Listener.Addr().String())
	n.open = append(n.open, Opening{Prefix: netip.PrefixFrom(ap.Addr(), 32), Port: int(ap.Port())})
	return int(ap.Port())
}

func (n *testNet) options() *Options {
	return &Options{Resolve: n.resolve, Open: n.open, HostAddrs: []netip.Addr{}}
}

// startProxy serves a proxy on a loopback port; the report is read with
// its Close.
func startProxy(t testing.TB, opts *Options, pol Policy) (*Proxy, string) {
	t.Helper()
	p, err := New(opts, "run-test", pol)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(l) }()
	t.Cleanup(func() {
		p.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return p, l.Addr().String()
}

// proxiedClient goes through the proxy at addr, trusting roots (nil: the
// system's).
func proxiedClient(addr string, roots *x509.CertPool) *http.Client {
	u := &url.URL{Scheme: "http", Host: addr}
	return &http.Client{Transport: &http.Transport{
		Proxy:             http.ProxyURL(u),
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		DisableKeepAlives: true,
	}}
}

func certPool(t testing.TB, s *httptest.Server) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(s.Certificate())
	return pool
}

func get(t testing.TB, c *http.Client, u string) (int, string, error) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// recorder is a server that answers "hello <path>" and keeps the hosts
// and headers it saw.
type recorder struct {
	mu    sync.Mutex
	hosts []string
	hdrs  []http.Header
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	rc.hosts = append(rc.hosts, r.Host)
	rc.hdrs = append(rc.hdrs, r.Header.Clone())
	rc.mu.Unlock()
	if n, err := strconv.Atoi(r.URL.Query().Get("n")); err == nil {
		w.Write([]byte(strings.Repeat("x", n)))
		return
	}
	fmt.Fprintf(w, "hello %s", r.URL.Path)
}

func TestPlainGET(t *testing.T) {
	rc := &recorder{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	tn := &testNet{names: map[string]string{"pypi.test": "127.0.0.1"}}
	port := tn.serve(t, srv)
	p, addr := startProxy(t, tn.options(), Policy{Allow: mustRules(t, "pypi.test:"+strconv.Itoa(port))})

	req, _ := http.NewRequest("GET", fmt.Sprintf("http://pypi.test:%d/simple/", port), nil)
	req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
	req.Header.Set("Proxy-Foo", "bar")
	resp, err := proxiedClient(addr, nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello /simple/" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if want := fmt.Sprintf("pypi.test:%d", port); len(rc.hosts) != 1 || rc.hosts[0] != want {
		t.Errorf("server saw hosts %v, want %s", rc.hosts, want)
	}
	for k := range rc.hdrs[0] {
		if strings.HasPrefix(k, "Proxy-") {
			t.Errorf("header %s reached the server", k)
		}
	}
	// A Host header other than the URL's does not reach the server.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET http://pypi.test:%d/ HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n", port)
	io.ReadAll(c)
	c.Close()
	if len(rc.hosts) != 2 || rc.hosts[1] != rc.hosts[0] {
		t.Errorf("server saw hosts %v", rc.hosts)
	}

	rep := p.Close()
	if len(rep.Records) != 2 {
		t.Fatalf("records %+v", rep.Records)
	}
	r := rep.Records[0]
	if !r.Allowed || r.Host != "pypi.test" || r.Port != port || r.Method != "GET" || r.Received != int64(len(body)) || r.Addr != srv.Listener.Addr().String() {
		t.Errorf("record %+v", r)
	}
	if rep.Connections != 2 || rep.Refused != 0 || rep.BytesReceived != rep.Records[0].Received+rep.Records[1].Received {
		t.Errorf("report %+v", rep)
	}
}

func TestConnectTLS(t *testing.T) {
	rc := &recorder{}
	srv := httptest.NewTLSServer(rc)
	defer srv.Close()
	tn := &testNet{names: map[string]string{"example.com": "127.0.0.1"}}
	port := tn.serve(t, srv)
	var seen []Record
	opts := tn.options()
	opts.OnRecord = func(run string, r Record) { seen = append(seen, r) }
	p, addr := startProxy(t, opts, Policy{Allow: mustRules(t, "example.com:"+strconv.Itoa(port))})

	code, body, err := get(t, proxiedClient(addr, certPool(t, srv)), fmt.Sprintf("https://example.com:%d/x", port))
	if err != nil || code != 200 || body != "hello /x" {
		t.Fatalf("got %d %q %v", code, body, err)
	}
	rep := p.Close()
	if len(rep.Records) != 1 || len(seen) != 1 {
		t.Fatalf("records %+v, OnRecord saw %+v", rep.Records, seen)
	}
	r := rep.Records[0]
	// A TLS 1.3 exchange of one small request: a few kB each way.
	if !r.Allowed || r.Method != "CONNECT" || r.Host != "example.com" || r.Sent < 200 || r.Received < int64(len(body)) || r.Received > 10000 {
		t.Errorf("record %+v", r)
	}
	if len(rc.hosts) != 1 || !strings.HasPrefix(rc.hosts[0], "example.com:") {
		t.Errorf("server saw %v", rc.hosts)
	}
}

func TestRefused(t *testing.T) {
	plain := httptest.NewServer(&recorder{})
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(&recorder{})
	defer tlsSrv.Close()
	tn := &testNet{names: map[string]string{
		"pypi.test": "127.0.0.1", "example.com": "127.0.0.1", "meta.test": "169.254.169.254",
		"lo.test": "127.0.0.1", "mapped.test": "::ffff:10.0.0.1", "self.test": "203.0.113.7",
		"cgnat.test": "100.64.1.1", "ula.test": "fd00::1", "zero.test": "0.1.2.3", "nat64.test": "64:ff9b::a9fe:a9fe",
	}}
	pport, tport := tn.serve(t, plain), tn.serve(t, tlsSrv)
	ps, ts := strconv.Itoa(pport), strconv.Itoa(tport)
	for _, tc := range []struct {
		name   string
		allow  []string
		noOpen bool
		url    string
		sni    string // for https: a ServerName other than the URL's host
		want   string // in the body (plain) or the error (CONNECT)
	}{
		{name: "not in rules", allow: []string{"pypi.test"}, url: "http://evil.test:" + ps + "/", want: "evil.test:" + ps + " is not allowed by this run's network policy; add it to network.allow"},
		{name: "not in rules CONNECT", allow: []string{"pypi.test"}, url: "https://evil.test:" + ts + "/", want: "not allowed by this run's network policy"},
		{name: "loopback without opening", allow: []string{"lo.test:" + ps}, noOpen: true, url: "http://lo.test:" + ps + "/", want: "resolves to 127.0.0.1, a loopback address"},
		{name: "loopback without opening CONNECT", allow: []string{"example.com:" + ts}, noOpen: true, url: "https://example.com:" + ts + "/", want: "a loopback address"},
		{name: "metadata", allow: []string{"meta.test"}, url: "http://meta.test/latest/meta-data/", want: "169.254.169.254, a link-local address"},
		{name: "ipv4-mapped private", allow: []string{"mapped.test"}, url: "http://mapped.test/", want: "a private address"},
		{name: "IP literal not in rules", allow: []string{"pypi.test:" + ps}, url: "http://127.0.0.1:" + ps + "/", want: "127.0.0.1:" + ps + " is not allowed"},
		{name: "wrong port", allow: []string{"pypi.test:1"}, url: "http://pypi.test:" + ps + "/", want: "is not allowed"},
		{name: "host's own address", allow: []string{"self.test"}, url: "http://self.test/", want: "203.0.113.7, one of the host's own addresses"},
		{name: "CGNAT", allow: []string{"cgnat.test"}, url: "http://cgnat.test/", want: "a shared (CGNAT) address"},
		{name: "ULA", allow: []string{"ula.test"}, url: "http://ula.test/", want: "fd00::1, a private address"},
		{name: "this network", allow: []string{"zero.test"}, url: "http://zero.test/", want: "an unspecified address"},
		{name: "NAT64 of metadata", allow: []string{"nat64.test"}, url: "http://nat64.test/", want: "64:ff9b::a9fe:a9fe, carrying 169.254.169.254, a link-local address"},
		{name: "unresolvable", allow: []string{"nx.test"}, url: "http://nx.test/", want: "cannot resolve nx.test"},
		{name: "domain fronting", allow: []string{"example.com:" + ts}, url: "https://example.com:" + ts + "/", sni: "other.example.com", want: "EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tn.options()
			opts.HostAddrs = []netip.Addr{netip.MustParseAddr("203.0.113.7")}
			if tc.noOpen {
				opts.Open = nil
			}
			p, addr := startProxy(t, opts, Policy{Allow: mustRules(t, tc.allow...)})
			c := proxiedClient(addr, certPool(t, tlsSrv))
			c.Transport.(*http.Transport).TLSClientConfig.ServerName = tc.sni
			code, body, err := get(t, c, tc.url)
			if strings.HasPrefix(tc.url, "https") {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("got %d %q, %v; want an error with %q", code, body, err, tc.want)
				}
			} else if !(code == 403 || code == 502) || !strings.HasPrefix(body, "nsbox egress: ") || !strings.Contains(body, tc.want) {
				t.Errorf("got %d %q, %v; want 403 with %q", code, body, err, tc.want)
			}
			rep := p.Close()
			if len(rep.Records) != 1 || rep.Records[0].Allowed || rep.Refused != 1 {
				t.Fatalf("report %+v", rep)
			}
			if tc.sni != "" && rep.Records[0].Reason != `SNI "other.example.com" differs from CONNECT host example.com (domain fronting refused)` {
				t.Errorf("reason %q", rep.Records[0].Reason)
			}
		})
	}
}

func TestNonTLSConnect(t *testing.T) {
	srv := httptest.NewServer(&recorder{})
	defer srv.Close()
	tn := &testNet{names: map[string]string{"pypi.test": "127.0.0.1"}}
	port := tn.serve(t, srv)
	p, addr := startProxy(t, tn.options(), Policy{Allow: mustRules(t, "pypi.test:"+strconv.Itoa(port))})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT pypi.test:%d HTTP/1.1\r\nHost: pypi.test\r\n\r\nGET / HTTP/1.1\r\nHost: pypi.test\r\n\r\n", port)
	b, _ := io.ReadAll(c)
	if string(b) != "HTTP/1.1 200 Connection established\r\n\r\n" {
		t.Errorf("got %q", b)
	}
	rep := p.Close()
	if len(rep.Records) != 1 || !strings.HasPrefix(rep.Records[0].Reason, "not a TLS ClientHello") {
		t.Errorf("report %+v", rep)
	}
}

func TestConnectionCap(t *testing.T) {
	srv := httptest.NewServer(&recorder{})
	defer srv.Close()
	tn := &testNet{names: map[string]string{"pypi.test": "127.0.0.1"}}
	port := tn.serve(t, srv)
	p, addr := startProxy(t, tn.options(), Policy{Allow: mustRules(t, "pypi.test:"+strconv.Itoa(port)), MaxConnections: 2})
	c := proxiedClient(addr, nil)
	u := fmt.Sprintf("http://pypi.test:%d/", port)
	for i, want := range []int{200, 200, 403} {
		code, body, err := get(t, c, u)
		if err != nil || code != want {
			t.Fatalf("request %d: %d %q %v, want %d", i, code, body, err, want)
		}
		if want == 403 && body != "nsbox egress: connection cap of 2 reached\n" {
			t.Errorf("body %q", body)
		}
	}
	if rep := p.Close(); rep.Capped != "connection cap of 2 reached" || rep.Connections != 2 || rep.Refused != 1 {
		t.Errorf("report %+v", rep)
	}
}

func TestByteCap(t *testing.T) {
	plain := httptest.NewServer(&recorder{})
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(&recorder{})
	defer tlsSrv.Close()
	tn := &testNet{names: map[string]string{"pypi.test": "127.0.0.1", "example.com": "127.0.0.1"}}
	pport, tport := tn.serve(t, plain), tn.serve(t, tlsSrv)
	for _, u := range []string{
		fmt.Sprintf("http://pypi.test:%d/?n=1000000", pport),
		fmt.Sprintf("https://example.com:%d/?n=1000000", tport),
	} {
		t.Run(u[:5], func(t *testing.T) {
			p, addr := startProxy(t, tn.options(), Policy{
				Allow:    mustRules(t, "pypi.test:"+strconv.Itoa(pport), "example.com:"+strconv.Itoa(tport)),
				MaxBytes: 100000,
			})
			code, body, err := get(t, proxiedClient(addr, certPool(t, tlsSrv)), u)
			if err == nil {
				t.Errorf("got %d and %d bytes, want the connection cut", code, len(body))
			}
			rep := p.Close()
			if rep.Capped != "byte cap of 100000 reached" || len(rep.Records) != 1 || rep.Records[0].Reason != rep.Capped {
				t.Errorf("report %+v", rep)
			}
			if total := rep.BytesSent + rep.BytesReceived; total < 100000 || total > 300000 {
				t.Errorf("%d bytes moved under a cap of 100000", total)
			}
		})
	}
}

func TestNotAbsolute(t *testing.T) {
	_, addr := startProxy(t, &Options{}, Policy{})
	code, body, err := get(t, http.DefaultClient, "http://"+addr+"/simple/")
	if err != nil || code != 400 || !strings.HasPrefix(body, "nsbox egress: this is a proxy; it forwards only absolute http:// URLs") {
		t.Errorf("got %d %q %v", code, body, err)
	}
}

// TestCloseEndsTunnels: Close does not wait for a sandbox to hang up.
func TestCloseEndsTunnels(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-release
	}))
	defer srv.Close()
	defer close(release)
	tn := &testNet{names: map[string]string{"example.com": "127.0.0.1"}}
	port := strconv.Itoa(tn.serve(t, srv))
	p, addr := startProxy(t, tn.options(), Policy{Allow: mustRules(t, "example.com:"+port)})
	resp, err := proxiedClient(addr, certPool(t, srv)).Get("https://example.com:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rep := p.Close()
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("the tunnel outlived Close")
	}
	if len(rep.Records) != 1 || !rep.Records[0].Allowed {
		t.Errorf("report %+v", rep)
	}
}

func TestCloseWithoutServe(t *testing.T) {
	p, err := New(&Options{}, "r", Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if rep := p.Close(); len(rep.Records) != 0 {
		t.Errorf("report %+v", rep)
	}
}
