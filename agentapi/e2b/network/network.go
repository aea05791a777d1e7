// Package network is E2B's network option (Sandbox.create's network,
// Sandbox.updateNetwork) in nsbox's terms: what a sandbox keeps of it,
// the egress policy its session gets, and what an update may change.
package network

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/egress"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// E2B's network option (Sandbox.create's network, E2B's
// SandboxNetworkConfig) in nsbox's terms. An nsbox sandbox has loopback
// only; what it reaches beyond goes through the daemon's egress proxy,
// which lets through only the hosts its policy names, each within the
// operator's [network] allow (docs/NETWORK.md). So:
//
//   - allowOut becomes the sandbox's egress policy: each entry a host
//     ("pypi.org", ports 80 and 443), "host:port", "*.example.com", or a
//     single address (an IP, or a CIDR of one address) the operator
//     allows. A wider range (E2B's allTraffic, 0.0.0.0/0) cannot be
//     allowed: the proxy decides per named host.
//   - denyOut always holds: nothing the policy does not name gets out, and
//     an entry of both lists is allowed, as E2B's allow takes precedence.
//     Without allowOut nothing gets out at all (E2B's default lets
//     everything out; nsbox's lets nothing).
//   - allowPublicTraffic: true opens the sandbox's own servers (getHost
//     ports) to requests without credentials, as E2B's proxy does; false,
//     and the default, asks for the sandbox's traffic or access token or
//     its creator's key. The envd and code-interpreter planes always ask.
//   - maskRequestHost is the Host those servers see (${PORT}: the port).
//   - rules (egress header transforms) and egressProxy are refused.

// Config is the create body's network.
type Config struct {
	AllowOut           []string                   `json:"allowOut"`
	DenyOut            []string                   `json:"denyOut"`
	AllowPublicTraffic *bool                      `json:"allowPublicTraffic"`
	MaskRequestHost    *string                    `json:"maskRequestHost"`
	Rules              map[string]json.RawMessage `json:"rules"`
	EgressProxy        map[string]json.RawMessage `json:"egressProxy"`
}

// Info is what a sandbox keeps of its network option (in its
// record) and reports as getInfo's network (E2B's SandboxNetworkInfo).
type Info struct {
	AllowOut           []string `json:"allowOut,omitempty"`
	DenyOut            []string `json:"denyOut,omitempty"`
	AllowPublicTraffic bool     `json:"allowPublicTraffic"`
	MaskRequestHost    string   `json:"maskRequestHost,omitempty"`
}

// PortPlaceholder is what maskRequestHost's port is written as.
const PortPlaceholder = "${PORT}"

// Parse checks n and returns what the sandbox keeps of it and the egress
// policy its session gets (nil: none, loopback only). fromSnapshot: the
// sandbox is a snapshot's copy, whose session keeps the snapshot's
// egress.
func (n *Config) Parse(fromSnapshot bool) (*Info, *agentapi.Network, error) {
	if len(n.Rules) > 0 {
		return nil, nil, errdefs.Field("network.rules", "egress transforms are not supported by nsbox's E2B endpoint: nsbox's proxy puts secrets into the requests to their own hosts ([network.secrets], docs/NETWORK.md)")
	}
	if n.EgressProxy != nil {
		return nil, nil, errdefs.Field("network.egressProxy", "an upstream proxy of the caller's is not supported: the daemon's egress proxy reaches the hosts itself")
	}
	info := &Info{DenyOut: n.DenyOut}
	if n.AllowPublicTraffic != nil {
		info.AllowPublicTraffic = *n.AllowPublicTraffic
	}
	for i, d := range n.DenyOut {
		if _, err := netip.ParsePrefix(d); err != nil {
			if _, err := egress.ParseRule(d); err != nil {
				return nil, nil, errdefs.Field(fmt.Sprintf("network.denyOut[%d]", i), "%v, or a CIDR", err)
			}
		}
	}
	for i, a := range n.AllowOut {
		e, err := allowEntry(a)
		if err != nil {
			return nil, nil, errdefs.Field(fmt.Sprintf("network.allowOut[%d]", i), "%v", err)
		}
		info.AllowOut = append(info.AllowOut, e)
	}
	if n.MaskRequestHost != nil {
		if err := checkMask(*n.MaskRequestHost); err != nil {
			return nil, nil, errdefs.Field("network.maskRequestHost", "%q: %v", *n.MaskRequestHost, err)
		}
		info.MaskRequestHost = *n.MaskRequestHost
	}
	if len(info.AllowOut) == 0 {
		return info, nil, nil
	}
	if fromSnapshot {
		return nil, nil, errdefs.Field("network.allowOut", "a snapshot's copy keeps the egress of the sandbox it was taken from; leave allowOut out")
	}
	return info, &agentapi.Network{Allow: info.AllowOut}, nil
}

// allowEntry is a as an entry of nsbox's egress policy: what its rules
// take (egress.ParseRule: a host, host:port, *.domain, an address), or a
// CIDR of one address, taken as that address. Whether the operator
// allows it is the core's to say.
func allowEntry(a string) (string, error) {
	if p, err := netip.ParsePrefix(a); err == nil {
		if p.Bits() != p.Addr().BitLen() {
			return "", fmt.Errorf("%q is a range of addresses; nsbox's egress lets out named hosts and single addresses, each within the operator's [network] allow (E2B's allTraffic cannot be allowed): name the hosts", a)
		}
		return p.Addr().String(), nil
	}
	if _, err := egress.ParseRule(a); err != nil {
		return "", err
	}
	return a, nil
}

// checkMask: m is a Host header once its ${PORT} is a port.
func checkMask(m string) error {
	h := strings.ReplaceAll(m, PortPlaceholder, "1")
	if h == "" || len(h) > 255 || strings.ContainsAny(h, " \t\r\n/\\@?#") {
		return fmt.Errorf("not a host[:port] (%s stands for the port)", PortPlaceholder)
	}
	return nil
}

// MaskHost is the Host a sandbox server on port sees: its
// maskRequestHost, else host as it came.
func (n *Info) MaskHost(host, port string) string {
	if n == nil || n.MaskRequestHost == "" {
		return host
	}
	return strings.ReplaceAll(n.MaskRequestHost, PortPlaceholder, port)
}

// Public: the sandbox's own servers answer requests without credentials.
func (n *Info) Public() bool { return n != nil && n.AllowPublicTraffic }

// Update is the body of PUT /sandboxes/{id}/network
// (Sandbox.updateNetwork): the egress rules, replaced whole.
// AllowInternetAccess is ignored, as on create.
type Update struct {
	AllowOut            []string                   `json:"allowOut"`
	DenyOut             []string                   `json:"denyOut"`
	Rules               map[string]json.RawMessage `json:"rules"`
	EgressProxy         map[string]json.RawMessage `json:"egressProxy"`
	AllowInternetAccess *bool                      `json:"allow_internet_access"`
}

// Updated is the network option of a running sandbox that has now (nil:
// none) once u is applied. Its egress policy is its session's, fixed
// when the session started (the proxy in its network namespace serves
// it), so u may change denyOut (which always holds) but must name the
// allowOut the sandbox has; another is an error naming allowOut. An
// update that leaves allowOut out on a sandbox that has none (E2B's
// "clear the rules") changes nothing that gets out.
func (now *Info) Updated(u Update) (*Info, error) {
	c := Config{AllowOut: u.AllowOut, DenyOut: u.DenyOut, Rules: u.Rules, EgressProxy: u.EgressProxy}
	next, _, err := c.Parse(false)
	if err != nil {
		return nil, err
	}
	var had []string
	if now != nil {
		had = now.AllowOut
		next.AllowPublicTraffic, next.MaskRequestHost = now.AllowPublicTraffic, now.MaskRequestHost
	}
	if !sameSet(had, next.AllowOut) {
		return nil, errdefs.Field("allowOut", "a running sandbox's egress cannot change: its proxy lets out %s for the sandbox's life; create a sandbox with the allowOut it needs", orNothing(had))
	}
	return next, nil
}

// sameSet: a and b hold the same strings.
func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}

func orNothing(allow []string) string {
	if len(allow) == 0 {
		return "nothing"
	}
	return strings.Join(allow, ", ")
}
