package egress

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// helloTimeout bounds the wait for a tunnel's TLS ClientHello.
const helloTimeout = 10 * time.Second

// connect carries one CONNECT tunnel, which is one record. The tunnel
// carries only TLS: the ClientHello's server name is what the proxy checks
// against the CONNECT's host, and a protocol without one (ssh, raw TCP)
// would give a sandbox an unchecked pipe to any allowed port. (A client
// using Encrypted Client Hello shows only its outer, public name, and is
// refused as fronting; Python, pip, curl and Node do not use ECH.)
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	rec := &Record{Method: http.MethodConnect}
	defer p.finish(rec)
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		rec.Reason = "cannot take over the connection: " + err.Error()
		writeText(w, http.StatusInternalServerError, "nsbox egress: "+rec.Reason)
		return
	}
	defer p.track(conn)()
	defer conn.Close()
	host, port, ok := splitHostPort(r.Host)
	if !ok {
		rec.Host, rec.Reason = r.Host, "CONNECT needs host:port"
		refuseRaw(conn, http.StatusBadRequest, rec.Reason)
		return
	}
	rec.Host, rec.Port = normHost(host), port
	addr, ref := p.check(r.Context(), rec.Host, rec.Port)
	if ref == nil {
		ref = p.admit()
	}
	if ref != nil {
		rec.Reason = ref.reason
		refuseRaw(conn, ref.code, ref.reason)
		return
	}
	// Nothing is dialed until the ClientHello has been read and checked,
	// so a tunnel that will be refused never reaches the upstream. (Its
	// price: a host that cannot be reached shows as a TLS handshake cut
	// short, since the 200 has gone; the record says why.)
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	// The sandbox's side reads what the server's bufio.Reader already
	// holds first, then the ClientHello is replayed ahead of the rest.
	buffered, _ := brw.Reader.Peek(brw.Reader.Buffered())
	rest := bytes.NewReader(buffered)
	sandbox := &readerConn{Conn: conn, r: io.MultiReader(rest, conn)}
	sandbox.SetReadDeadline(time.Now().Add(helloTimeout))
	hello, sni, err := readHello(sandbox)
	if err != nil {
		rec.Reason = err.Error()
		return
	}
	sandbox.SetReadDeadline(time.Time{})
	// A client sends no server name for an IP literal; then there is no
	// name to front with.
	_, ipErr := netip.ParseAddr(rec.Host)
	if !(ipErr == nil && sni == "") && normHost(sni) != rec.Host {
		rec.Reason = fmt.Sprintf("SNI %q differs from CONNECT host %s (domain fronting refused)", sni, rec.Host)
		return
	}
	rec.Allowed, rec.Addr = true, addr.String()
	f := &flow{p: p}
	defer f.done(rec)
	if secrets := p.boundSecrets(rec.Host, rec.Port); len(secrets) > 0 || p.intercepts(rec.Host, rec.Port) {
		counted := &countedConn{Conn: &readerConn{Conn: conn, r: io.MultiReader(bytes.NewReader(hello), sandbox.r)}, f: f}
		p.terminate(r.Context(), counted, rec, addr, secrets)
		return
	}
	upstream, err := p.dial(r.Context(), addr)
	if err != nil {
		rec.Reason = err.Error()
		return
	}
	defer p.track(upstream)()
	defer upstream.Close()
	// What the server's reader held beyond the hello goes up with it,
	// checked as TLS records as everything after it is.
	pre := append(hello, buffered[len(buffered)-rest.Len():]...)
	if err := tunnel(conn, upstream, pre, f); errors.Is(err, errNotTLS) {
		rec.Reason = err.Error()
	}
}

// refuseRaw answers a CONNECT the proxy will not make. The message is the
// reason phrase too, because clients (urllib3: "Tunnel connection failed:
// 403 ...") show the status line of a failed CONNECT, not its body.
func refuseRaw(conn net.Conn, code int, reason string) {
	rawResponse(conn, code, "nsbox egress: "+reason)
}

// rawResponse writes a whole response whose reason phrase and body are
// msg (made printable ASCII), and which closes the connection.
func rawResponse(w io.Writer, code int, msg string) {
	msg = strings.Map(func(r rune) rune {
		if r < ' ' || r > '~' {
			return ' '
		}
		return r
	}, msg)
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n",
		code, msg, len(msg)+1, msg)
}

var errHelloRead = errors.New("ClientHello read")

// readHello reads the sandbox's TLS ClientHello with crypto/tls's own
// parser and returns the bytes it consumed, to be replayed upstream, and
// the server name. Anything that is not a TLS handshake fails here.
func readHello(c net.Conn) (hello []byte, sni string, err error) {
	rc := &recordingConn{Conn: c}
	var info *tls.ClientHelloInfo
	err = tls.Server(rc, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		info = h
		return nil, errHelloRead
	}}).Handshake()
	if info == nil {
		return nil, "", fmt.Errorf("not a TLS ClientHello; a tunnel carries only TLS (%v)", err)
	}
	return rc.buf.Bytes(), info.ServerName, nil
}

// recordingConn keeps what is read through it and writes nothing, so the
// parse of a ClientHello cannot answer the sandbox.
type recordingConn struct {
	net.Conn
	buf bytes.Buffer
}

func (c *recordingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.buf.Write(b[:n])
	return n, err
}

func (c *recordingConn) Write(b []byte) (int, error) { return 0, errHelloRead }

// readerConn reads from r instead of the connection itself.
type readerConn struct {
	net.Conn
	r io.Reader
}

func (c *readerConn) Read(b []byte) (int, error) { return c.r.Read(b) }
