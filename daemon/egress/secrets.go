package egress

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/nsbox/nsbox/daemon/egress/mask"
)

// boundSecrets are the policy's secrets bound to host:port.
func (p *Proxy) boundSecrets(host string, port int) []Secret {
	var out []Secret
	for _, s := range p.policy.Secrets {
		for _, r := range s.Hosts {
			if r.Matches(host, port) {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// terminate serves a tunnel to a host bound to secrets: TLS with the
// sandbox under the daemon's CA, then HTTP/1.1 requests one by one, each
// with the bound secrets' placeholders swapped for their values and sent
// on over verified TLS to the checked address; each answer comes back with
// the values masked (package mask). Bytes are counted on the
// sandbox's connection, so the requests inside are not counted again.
func (p *Proxy) terminate(ctx context.Context, sandbox net.Conn, rec *Record, addr netip.AddrPort, secrets []Secret) {
	cert, err := p.opts.CA.leaf(rec.Host)
	if err != nil {
		rec.Reason = err.Error()
		return
	}
	tc := tls.Server(sandbox, &tls.Config{
		Certificates: []tls.Certificate{*cert},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	defer tc.Close()
	hctx, cancel := context.WithTimeout(ctx, helloTimeout)
	err = tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		rec.Reason = "TLS with the sandbox: " + err.Error()
		return
	}
	hostport := net.JoinHostPort(rec.Host, strconv.Itoa(rec.Port))
	ctx = context.WithValue(ctx, flowKey{}, &flowCtx{addr: addr, rec: rec})
	values := make([]string, len(secrets))
	for i, sec := range secrets {
		values[i] = sec.Value
	}
	masker := mask.New(values)
	br := bufio.NewReader(tc)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		// The Host header must name the tunnel's host: on a shared front
		// (a CDN) another Host would carry the secret to another site.
		if req.Host != "" && normHost(hostOnly(req.Host)) != rec.Host {
			writeTextResponse(tc, http.StatusMisdirectedRequest,
				fmt.Sprintf("nsbox egress: Host %s differs from the tunnel's host %s", req.Host, rec.Host))
			return
		}
		req.URL.Scheme, req.URL.Host, req.Host, req.RequestURI = "https", hostport, "", ""
		// The proxy's own headers are not the upstream's, and a
		// placeholder swapped into one must not travel.
		for k := range req.Header {
			if strings.HasPrefix(k, "Proxy-") {
				req.Header.Del(k)
			}
		}
		p.swapSecrets(req.Header, secrets, rec)
		// The answer is masked as it streams, which needs it in clear:
		// gzip (decoded here) or nothing; a Range of gzip would not decode.
		req.Header.Set("Accept-Encoding", "gzip")
		if req.Header.Get("Range") != "" {
			req.Header.Set("Accept-Encoding", "identity")
		}
		resp, err := p.roundTrip(req.WithContext(ctx))
		if err != nil {
			// Go's errors quote what a malformed answer said.
			writeTextResponse(tc, http.StatusBadGateway, "nsbox egress: "+masker.String(err.Error()))
			return
		}
		if err := decodeForMasking(resp); err != nil {
			resp.Body.Close()
			writeTextResponse(tc, http.StatusBadGateway, "nsbox egress: "+rec.Host+": "+masker.String(err.Error()))
			return
		}
		masker.Response(resp)
		err = resp.Write(tc)
		resp.Body.Close()
		if err != nil || req.Close || resp.Close {
			return
		}
		// What the upstream did not read of the body is still on the
		// wire ahead of the next request.
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return
		}
	}
}

// swapSecrets replaces each bound secret's placeholder with its value in
// every request header, and records the names of those it swapped.
func (p *Proxy) swapSecrets(h http.Header, secrets []Secret, rec *Record) {
	for _, s := range secrets {
		ph := p.placeholders[s.Name]
		for _, vs := range h {
			for i, v := range vs {
				if strings.Contains(v, ph) {
					vs[i] = strings.ReplaceAll(v, ph, s.Value)
					if !slices.Contains(rec.Secrets, s.Name) {
						rec.Secrets = append(rec.Secrets, s.Name)
					}
				}
			}
		}
	}
}

// decodeForMasking leaves resp's body in clear: gzip is decoded (and
// Content-Encoding and Content-Length dropped); any other coding, or
// gzip twice, is an error, since a body the proxy cannot read it cannot
// mask.
func decodeForMasking(resp *http.Response) error {
	var codings []string
	for _, v := range resp.Header.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	switch {
	case len(codings) == 0 || resp.Body == http.NoBody: // HEAD, 304: no body to read
		return nil
	case len(codings) > 1 || codings[0] != "gzip":
		return fmt.Errorf("answered with Content-Encoding %s, which the proxy cannot read to mask the secret (it asks for gzip or none)", strings.Join(codings, ", "))
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		return fmt.Errorf("a gzip answer that does not decode: %w", err)
	}
	resp.Body = &gzipBody{Reader: zr, c: resp.Body}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	// Chunked to the sandbox: a body delimited by closing would leave
	// the sandbox waiting for a close the loop does not make.
	resp.ContentLength, resp.TransferEncoding = -1, []string{"chunked"}
	return nil
}

type gzipBody struct {
	*gzip.Reader
	c io.Closer
}

func (b *gzipBody) Close() error { return b.c.Close() }

// hostOnly is the host of a Host header, with or without a port.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return h
}

// writeTextResponse is writeText on a connection the proxy reads itself.
func writeTextResponse(w io.Writer, code int, msg string) { rawResponse(w, code, msg) }
