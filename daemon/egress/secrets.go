package egress

import (
	"bufio"
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
// on over verified TLS to the checked address. Bytes are counted on the
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
		p.swapSecrets(req.Header, secrets, rec)
		resp, err := p.roundTrip(req.WithContext(ctx))
		if err != nil {
			writeTextResponse(tc, http.StatusBadGateway, "nsbox egress: "+err.Error())
			return
		}
		p.hideSecrets(resp.Header, secrets)
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

// hideSecrets puts the placeholders back into response headers, so a
// server that echoes a header does not hand the value to the sandbox.
// (A body that echoes it is beyond the proxy's reach.)
func (p *Proxy) hideSecrets(h http.Header, secrets []Secret) {
	for _, s := range secrets {
		for _, vs := range h {
			for i, v := range vs {
				vs[i] = strings.ReplaceAll(v, s.Value, p.placeholders[s.Name])
			}
		}
	}
}

// hostOnly is the host of a Host header, with or without a port.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return h
}

// writeTextResponse is writeText on a connection the proxy reads itself.
func writeTextResponse(w io.Writer, code int, msg string) { rawResponse(w, code, msg) }
