// Package egress is the daemon's per-sandbox forward proxy: the only way a
// sandbox with a network policy reaches anything beyond its own loopback.
//
// The sandbox keeps only lo. The daemon creates a listener on 127.0.0.1
// inside the sandbox's own network namespace (ListenIn) and serves a Proxy
// on it: plain HTTP (absolute-form requests) and CONNECT. For every
// connection the proxy resolves the name on the host, refuses the denied
// address ranges after resolution (so a name that rebinds to 127.0.0.1 or
// 169.254.169.254 fails), dials the very address it checked, refuses IP
// literals unless a rule names them, and for CONNECT reads the TLS
// ClientHello and refuses a server name other than the CONNECT's host (no
// domain fronting). Secrets: a sandbox holds a random placeholder; for the
// hosts bound to a secret the proxy terminates TLS with the daemon's CA and
// swaps the placeholder for the value in request headers, connecting
// upstream with full certificate verification. Every connection is
// recorded; caps on connections and bytes end the offending one.
package egress

import (
	"context"
	"crypto/x509"
	"log/slog"
	"net/netip"

	"github.com/nsbox/nsbox/daemon/egress/pkgcache"
)

// Rule is one allowed destination: Host is an exact name, a one-label
// wildcard ("*.pythonhosted.org": exactly one more label, never the bare
// suffix), or an IP literal; Port 0 means 80 and 443.
type Rule struct {
	Host string
	Port int
}

// Secret is a named credential and the hosts it may be sent to.
type Secret struct {
	Name  string
	Value string
	Hosts []Rule
}

// Opening is a denied address range the operator opened on purpose
// (tests: 127.0.0.1 with one port); Port 0 opens every port.
type Opening struct {
	Prefix netip.Prefix
	Port   int
}

// Options are the daemon's, shared by every Proxy.
type Options struct {
	// Resolve resolves a host name; nil uses net.DefaultResolver.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Open lists the denied ranges the operator opened.
	Open []Opening
	// HostAddrs are the host's own addresses, refused like loopback; nil
	// means the proxy reads them (net.InterfaceAddrs) once.
	HostAddrs []netip.Addr
	// CA signs the certificates of the hosts the proxy terminates TLS for
	// (secret hosts); nil: a policy with secrets is refused by New.
	CA *CA
	// Cache, when set, keeps immutable package artifacts (pkgcache); each
	// Proxy keeps its own URL-to-digest index, so it serves a file only
	// for a URL whose digest it learned itself.
	Cache *pkgcache.Cache
	// Intercept are the hosts whose TLS the proxy terminates (with CA,
	// verifying the upstream in full) so that the package files fetched
	// from them over HTTPS can be cached: package indexes such as
	// pypi.org and files.pythonhosted.org. Needs CA and Cache.
	Intercept []Rule
	// RootCAs verifies upstream certificates; nil uses the host's.
	RootCAs *x509.CertPool
	Log     *slog.Logger
	// OnRecord, when set, sees each record as its connection ends
	// (metrics, logs).
	OnRecord func(runID string, r Record)
}

// Policy is one sandbox's: what it may reach, with which secrets, and
// its caps (0: no cap).
type Policy struct {
	Allow          []Rule
	Secrets        []Secret
	MaxConnections int
	MaxBytes       int64 // both directions, all connections
}

// Record is one connection (or one plain-HTTP request) as the proxy saw it.
type Record struct {
	Host     string   `json:"host"`
	Port     int      `json:"port"`
	Addr     string   `json:"addr,omitempty"` // the address dialed, ip:port
	Method   string   `json:"method"`         // CONNECT, GET, ...
	Sent     int64    `json:"bytes_sent"`     // sandbox -> upstream
	Received int64    `json:"bytes_received"` // upstream -> sandbox
	Allowed  bool     `json:"allowed"`
	Reason   string   `json:"reason,omitempty"` // why refused or cut
	Secrets  []string `json:"secrets,omitempty"`
	Cached   bool     `json:"cached,omitempty"`
}

// Report is what a Proxy saw over its life.
type Report struct {
	Records       []Record
	Connections   int
	Refused       int
	BytesSent     int64
	BytesReceived int64
	Capped        string // the cap that ended a connection, if one did
}

// CA is the daemon's certificate authority for the hosts the proxy
// terminates TLS for (ca.go).
type CA struct{ impl caImpl }
