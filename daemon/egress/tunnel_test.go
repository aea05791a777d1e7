package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clientHello is the first TLS record a client for sni sends.
func clientHello(t *testing.T, sni string) []byte {
	t.Helper()
	c, s := net.Pipe()
	defer s.Close()
	go tls.Client(c, &tls.Config{ServerName: sni}).Handshake()
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(s, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(s, body); err != nil {
		t.Fatal(err)
	}
	return append(hdr, body...)
}

// rawUpstream is a TCP server on 127.0.0.1, opened in tn, that hands each
// connection to serve and counts the connections made to it.
type rawUpstream struct {
	l    net.Listener
	port int
}

func newRawUpstream(t *testing.T, tn *testNet, serve func(net.Conn)) *rawUpstream {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ap := netip.MustParseAddrPort(l.Addr().String())
	tn.open = append(tn.open, Opening{Prefix: netip.PrefixFrom(ap.Addr(), 32), Port: int(ap.Port())})
	u := &rawUpstream{l: l, port: int(ap.Port())}
	if serve != nil {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() { defer c.Close(); serve(c) }()
			}
		}()
	}
	return u
}

// accepts counts the connections made so far, for a listener nobody else
// accepts on: it connects once more itself and accepts until its own
// connection comes out of the kernel's queue, which is in order.
func (u *rawUpstream) accepts(t *testing.T) int {
	t.Helper()
	marker, err := net.Dial("tcp", u.l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer marker.Close()
	n := 0
	for {
		c, err := u.l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if c.RemoteAddr().String() == marker.LocalAddr().String() {
			return n
		}
		n++
	}
}

// connectTunnel opens a CONNECT tunnel to host:port through the proxy at
// addr and returns it once the proxy has answered 200.
func connectTunnel(t *testing.T, addr, host string, port int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// Only a hang reaches this deadline.
	c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n", host, port, host, port)
	want := "HTTP/1.1 200 Connection established\r\n\r\n"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != want {
		t.Fatalf("CONNECT answered %q, %v", got, err)
	}
	return c
}

// TestRefusedTunnelNeverDials: a tunnel refused for its ClientHello (a
// server name other than its host, or no TLS at all) has not connected
// to the upstream.
func TestRefusedTunnelNeverDials(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		send         func(t *testing.T) []byte
	}{
		{"domain fronting", `SNI "other.example.com" differs`, func(t *testing.T) []byte { return clientHello(t, "other.example.com") }},
		{"not TLS", "not a TLS ClientHello", func(*testing.T) []byte { return []byte("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := &testNet{names: map[string]string{"example.com": "127.0.0.1"}}
			u := newRawUpstream(t, tn, nil)
			p, addr := startProxy(t, tn.options(), Policy{Allow: mustRules(t, "example.com:"+strconv.Itoa(u.port))})
			c := connectTunnel(t, addr, "example.com", u.port)
			c.Write(tc.send(t))
			if b, _ := io.ReadAll(c); len(b) != 0 {
				t.Errorf("the sandbox read %q", b)
			}
			rep := p.Close()
			if n := u.accepts(t); n != 0 {
				t.Errorf("the upstream was connected to %d times", n)
			}
			if len(rep.Records) != 1 || rep.Records[0].Allowed || !strings.Contains(rep.Records[0].Reason, tc.reason) {
				t.Errorf("report %+v", rep)
			}
		})
	}
}

// TestTunnelCarriesOnlyTLS: after a valid ClientHello, bytes that are not
// TLS records cut the tunnel, and never reach the upstream, whether they
// come with the hello or after it.
func TestTunnelCarriesOnlyTLS(t *testing.T) {
	appData := func(body string) []byte {
		return append([]byte{23, 3, 3, byte(len(body) >> 8), byte(len(body))}, body...)
	}
	for _, tc := range []struct {
		name        string
		withHello   bool
		after, pass []byte // pass: the part of after that is TLS
	}{
		{"plain text with the hello", true, []byte("PING\r\n"), nil},
		{"plain text after the hello", false, []byte("SET k v\r\n"), nil},
		{"a record, then plain text", false, append(appData("abc"), "QUIT\r\n"...), appData("abc")},
		{"a header of TLS 2.x", false, []byte{23, 2, 0, 0, 1, 'x'}, nil},
		{"a record too long", false, []byte{23, 3, 3, 0x48, 0x01}, nil},
		{"an unknown content type", false, []byte{24, 3, 3, 0, 1, 'x'}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := &testNet{names: map[string]string{"example.com": "127.0.0.1"}}
			got := make(chan []byte, 1)
			u := newRawUpstream(t, tn, func(c net.Conn) {
				b, _ := io.ReadAll(c)
				got <- b
			})
			p, addr := startProxy(t, tn.options(), Policy{Allow: mustRules(t, "example.com:"+strconv.Itoa(u.port))})
			c := connectTunnel(t, addr, "example.com", u.port)
			hello := clientHello(t, "example.com")
			if tc.withHello {
				c.Write(append(bytes.Clone(hello), tc.after...))
			} else {
				c.Write(hello)
				c.Write(tc.after)
			}
			io.ReadAll(c)
			c.Close()
			if b, want := <-got, append(hello, tc.pass...); !bytes.Equal(b, want) {
				t.Errorf("the upstream got %q, want only %q", b[min(len(b), len(hello)):], tc.pass)
			}
			rep := p.Close()
			if len(rep.Records) != 1 || !rep.Records[0].Allowed || !strings.HasPrefix(rep.Records[0].Reason, "not a TLS record after the ClientHello") {
				t.Errorf("report %+v", rep)
			}
		})
	}
}

// TestByteCapExact: a cap lets exactly its bytes through on both paths
// and in both directions of a tunnel, and not one more.
func TestByteCapExact(t *testing.T) {
	const n = 2_000_000
	t.Run("plain HTTP", func(t *testing.T) {
		tn := &testNet{names: map[string]string{"pypi.test": "127.0.0.1"}}
		u := newRawUpstream(t, tn, nil)
		// With ?cl=1 a Content-Length, else chunked.
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			if r.URL.Query().Get("cl") == "1" {
				w.Header().Set("Content-Length", strconv.Itoa(n))
			}
			w.Write(bytes.Repeat([]byte("x"), n))
		})}
		go srv.Serve(u.l)
		t.Cleanup(func() { srv.Close() })
		for _, tc := range []struct{ serve, cl int }{{n, 0}, {n + 1, 0}, {2 * n, 0}, {n, 1}, {n + 1, 1}, {2 * n, 1}} {
			serve := tc.serve
			raw := fmt.Sprintf("GET http://pypi.test:%d/?n=%d&cl=%d HTTP/1.1\r\nHost: pypi.test:%d\r\n\r\n", u.port, serve, tc.cl, u.port)
			req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
			if err != nil {
				t.Fatal(err)
			}
			maxBytes := int64(headSize(req) + n)
			p, addr := startProxy(t, tn.options(), Policy{Allow: mustRules(t, "pypi.test:"+strconv.Itoa(u.port)), MaxBytes: maxBytes})
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(c, raw)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			c.Close()
			if len(body) != n || (err == nil) != (serve == n) {
				t.Errorf("served %d under a cap for %d: the sandbox read %d bytes, %v", serve, n, len(body), err)
			}
			rep := p.Close()
			if r := rep.Records[0]; r.Received != n || (r.Reason != "") != (serve > n) || rep.BytesSent+rep.BytesReceived > maxBytes {
				t.Errorf("served %d: report %+v", serve, rep)
			}
		}
	})
	hello := clientHello(t, "example.com")
	t.Run("tunnel, received", func(t *testing.T) {
		for _, serve := range []int{n, n + 1, 2 * n} {
			tn := &testNet{names: map[string]string{"example.com": "127.0.0.1"}}
			u := newRawUpstream(t, tn, func(c net.Conn) {
				io.ReadFull(c, make([]byte, len(hello)))
				c.Write(bytes.Repeat([]byte("x"), serve))
			})
			maxBytes := int64(len(hello) + n)
			p, addr := startProxy(t, tn.options(), Policy{Allow: mustRules(t, "example.com:"+strconv.Itoa(u.port)), MaxBytes: maxBytes})
			c := connectTunnel(t, addr, "example.com", u.port)
			c.Write(hello)
			if b, _ := io.ReadAll(c); len(b) != n {
				t.Errorf("served %d under a cap for %d: the sandbox read %d bytes", serve, n, len(b))
			}
			rep := p.Close()
			if r := rep.Records[0]; r.Received != n || (r.Reason != "") != (serve > n) {
				t.Errorf("served %d: report %+v", serve, rep)
			}
		}
	})
	t.Run("tunnel, sent", func(t *testing.T) {
		record := append([]byte{23, 3, 3, 0x40, 0}, bytes.Repeat([]byte("y"), 1<<14)...)
		const records = 100
		for _, over := range []int{0, 1} {
			tn := &testNet{names: map[string]string{"example.com": "127.0.0.1"}}
			got := make(chan int, 1)
			u := newRawUpstream(t, tn, func(c net.Conn) {
				b, _ := io.ReadAll(c)
				got <- len(b)
			})
			maxBytes := int64(len(hello) + records*len(record) - over)
			p, addr := startProxy(t, tn.options(), Policy{Allow: mustRules(t, "example.com:"+strconv.Itoa(u.port)), MaxBytes: maxBytes})
			c := connectTunnel(t, addr, "example.com", u.port)
			c.Write(hello)
			for range records {
				c.Write(record)
			}
			c.(*net.TCPConn).CloseWrite()
			io.ReadAll(c)
			if b := <-got; int64(b) != maxBytes {
				t.Errorf("cap %d: the upstream got %d bytes", maxBytes, b)
			}
			rep := p.Close()
			if r := rep.Records[0]; r.Sent != maxBytes || (r.Reason != "") != (over == 1) {
				t.Errorf("cap %d: report %+v", maxBytes, rep)
			}
		}
	})
}

// FuzzPumpRecords: whatever a sandbox sends after its hello, what goes
// up is a prefix of it made of well-framed TLS records (the last one
// possibly cut short by the sandbox's end), and anything else ends the
// tunnel.
func FuzzPumpRecords(f *testing.F) {
	f.Add([]byte{22, 3, 1, 0, 2, 1, 2, 23, 3, 3, 0, 1, 'x'})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{23, 3, 3, 0x48, 0x01})
	f.Add([]byte{23, 3, 3, 0, 3, 'a', 'b', 'c', 'P', 'I', 'N', 'G'})
	f.Fuzz(func(t *testing.T, in []byte) {
		src, peer := net.Pipe()
		peer.Close() // the sandbox sent only in, as pre
		dst, up := net.Pipe()
		got := make(chan []byte, 1)
		go func() { b, _ := io.ReadAll(up); got <- b }()
		err := pumpRecords(dst, src, in, &flow{p: &Proxy{}})
		dst.Close()
		out := <-got
		if !bytes.HasPrefix(in, out) {
			t.Fatalf("sent %q, not a prefix of %q", out, in)
		}
		rest := out
		for len(rest) > 0 {
			if len(rest) < 5 {
				t.Fatalf("a partial header went up: %q", rest)
			}
			n, herr := recordLen([5]byte(rest[:5]))
			if herr != nil {
				t.Fatalf("a bad header went up: % x", rest[:5])
			}
			rest = rest[min(len(rest), 5+n):]
		}
		if err == nil && len(out) != len(in) {
			t.Fatalf("ended cleanly after %d of %d bytes", len(out), len(in))
		}
	})
}
