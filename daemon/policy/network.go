package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/egress"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// Network is the operator's [network]: what a run may ask for at all.
// Zero means no run may have network.
type Network struct {
	// Allow lists the destinations a run may be allowed.
	Allow []egress.Rule
	// Secrets are the named secrets a run may ask for, each with the hosts
	// its value may be sent to.
	Secrets map[string]egress.Secret
	// MaxConnections and MaxBytes are each run's caps, and the most a
	// request may ask for (0: none).
	MaxConnections int
	MaxBytes       int64
}

// Enabled says whether any run may have network.
func (n *Network) Enabled() bool { return len(n.Allow) > 0 }

// Wire is the operator's network for GET /v1/info: the allow list, the
// secrets by name, the caps; nil when no run may have network.
func (n *Network) Wire() *agentapi.Network {
	if !n.Enabled() {
		return nil
	}
	w := WireNetwork(&egress.Policy{Allow: n.Allow, MaxConnections: n.MaxConnections, MaxBytes: n.MaxBytes})
	w.Secrets = slices.Sorted(maps.Keys(n.Secrets))
	return w
}

// Bounds on a request's network policy.
const (
	maxNetworkAllow   = 256
	maxNetworkSecrets = 64
)

// network resolves a request's network policy: the request's, else the
// profile's, checked against the operator's. nil means none.
func (pol *Rules) network(profile string, req *agentapi.Network) (*egress.Policy, error) {
	if req == nil && profile != "" {
		req = pol.profiles[profile].Network
	}
	if req == nil {
		return nil, nil
	}
	op := &pol.Network
	if !op.Enabled() {
		return nil, errdefs.Field("network", "this daemon allows no network: its operator has configured no [network] allow list (see docs/NETWORK.md); remove network from the request or ask the operator to add the hosts")
	}
	if len(req.Allow) == 0 {
		return nil, errdefs.Field("network.allow", "empty: name the hosts the run may reach, e.g. [\"pypi.org\"], or remove network")
	}
	if len(req.Allow) > maxNetworkAllow {
		return nil, errdefs.Field("network.allow", "more than %d entries", maxNetworkAllow)
	}
	p := &egress.Policy{MaxConnections: op.MaxConnections, MaxBytes: op.MaxBytes}
	for i, s := range req.Allow {
		r, err := egress.ParseRule(s)
		if err != nil {
			return nil, errdefs.Field(fmt.Sprintf("network.allow[%d]", i), "%v", err)
		}
		if !r.Within(op.Allow) {
			return nil, errdefs.Field(fmt.Sprintf("network.allow[%d]", i), "%q is not among the hosts this daemon's operator allows (%s); the operator adds it to [network] allow", s, ruleList(op.Allow))
		}
		p.Allow = append(p.Allow, r)
	}
	if len(req.Secrets) > maxNetworkSecrets {
		return nil, errdefs.Field("network.secrets", "more than %d names", maxNetworkSecrets)
	}
	for i, name := range req.Secrets {
		sec, ok := op.Secrets[name]
		if !ok {
			return nil, errdefs.Field(fmt.Sprintf("network.secrets[%d]", i), "%q is not a secret of this daemon (%s); the operator defines it in [network.secrets.%s]", name, secretList(op.Secrets), name)
		}
		if slices.ContainsFunc(p.Secrets, func(s egress.Secret) bool { return s.Name == name }) {
			return nil, errdefs.Field(fmt.Sprintf("network.secrets[%d]", i), "%q given twice", name)
		}
		for _, h := range sec.Hosts {
			if !h.Within(p.Allow) { // the proxy would refuse the policy: a 500 for every such run
				return nil, errdefs.Field(fmt.Sprintf("network.secrets[%d]", i), "%q is bound to %s, which network.allow does not reach; add %q to network.allow", name, h, h.String())
			}
		}
		p.Secrets = append(p.Secrets, sec)
	}
	for _, c := range []struct {
		field    string
		got, max int64
		dst      func(int64)
	}{
		{"network.max_connections", int64(req.MaxConnections), int64(op.MaxConnections), func(v int64) { p.MaxConnections = int(v) }},
		{"network.max_bytes", req.MaxBytes, op.MaxBytes, func(v int64) { p.MaxBytes = v }},
	} {
		switch {
		case c.got < 0:
			return nil, errdefs.Field(c.field, "%d is negative", c.got)
		case c.got == 0:
		case c.max > 0 && c.got > c.max:
			return nil, errdefs.Field(c.field, "%d is above the daemon's cap %d", c.got, c.max)
		default:
			c.dst(c.got)
		}
	}
	return p, nil
}

// WireNetwork is the wire form of a run's policy (for a session's
// description), secrets by name only.
func WireNetwork(p *egress.Policy) *agentapi.Network {
	if p == nil {
		return nil
	}
	n := &agentapi.Network{Allow: []string{}, MaxConnections: p.MaxConnections, MaxBytes: p.MaxBytes}
	for _, r := range p.Allow {
		n.Allow = append(n.Allow, r.String())
	}
	for _, s := range p.Secrets {
		n.Secrets = append(n.Secrets, s.Name)
	}
	return n
}

func ruleList(rs []egress.Rule) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.String()
	}
	return strings.Join(s, ", ")
}

func secretList(m map[string]egress.Secret) string {
	if len(m) == 0 {
		return "it has none"
	}
	return "it has " + strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}
