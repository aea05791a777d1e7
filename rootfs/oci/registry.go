package oci

import (
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// parseRef reads an image reference ("python:3.12-slim",
// "ghcr.io/org/img@sha256:..."); Docker Hub is the default registry, as
// for docker pull. With insecure, the registry must be on loopback.
func parseRef(ref string, insecure bool) (name.Reference, error) {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	r, err := name.ParseReference(ref, opts...)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w; give [REGISTRY/]REPOSITORY[:TAG|@DIGEST], e.g. docker.io/library/python:3.12-slim", ref, err)
	}
	if reg := r.Context().RegistryStr(); insecure && !loopback(reg) {
		return nil, fmt.Errorf("%w: --insecure is for a registry on this machine's loopback (localhost, 127.0.0.1, [::1]), and %s is not; reach it over https", ErrInsecure, reg)
	}
	return r, nil
}

// loopback reports a host (with or without a port) that is this machine's
// loopback.
func loopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// httpsOnly is the transport under go-containerregistry's: every request
// (the registry's, a redirect to a blob store's) goes over https, or over
// plain http to loopback with --insecure. go-containerregistry itself falls
// back to http for registries on loopback, private (RFC 1918) and .local
// addresses; a man in the middle could then serve any image.
type httpsOnly struct {
	next         http.RoundTripper
	loopbackHTTP bool
}

func (t httpsOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && !(t.loopbackHTTP && loopback(req.URL.Host)) {
		return nil, fmt.Errorf("%w: %s: use a registry that serves https, or, for a registry on this machine's loopback, --insecure", ErrInsecure, req.URL.Redacted())
	}
	return t.next.RoundTrip(req)
}

// NameFor suggests a rootfs name for an image reference: its repository's
// last part and its tag, "latest" left out ("python:3.12-slim" ->
// "python-3.12-slim"), made a valid rootfs name.
func NameFor(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	n := ref[strings.LastIndexByte(ref, '/')+1:]
	if repo, tag, ok := strings.Cut(n, ":"); ok && tag == "latest" {
		n = repo
	}
	return sanitize(strings.Replace(n, ":", "-", 1))
}

func sanitize(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	out := strings.TrimLeft(string(b), "._-")
	if len(out) > 63 {
		out = out[:63]
	}
	if out == "" {
		out = "image"
	}
	return out
}
