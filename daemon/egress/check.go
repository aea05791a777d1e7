package egress

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
)

// A refusal is why the proxy will not connect, and the HTTP status the
// sandbox sees for it.
type refusal struct {
	code   int
	reason string
}

// check decides one destination. In order: a rule must allow host:port;
// the name resolves on the host (an IP literal is its own address, and only
// a rule naming it lets it through the first step); every address must be
// outside the denied ranges unless an Opening covers it, so a name with
// one public and one private address is refused as a whole. It returns the
// address to dial: the proxy dials exactly what it checked, so a second
// lookup cannot rebind the name to 127.0.0.1.
func (p *Proxy) check(ctx context.Context, host string, port int) (netip.AddrPort, *refusal) {
	host = normHost(host)
	dest := net.JoinHostPort(host, strconv.Itoa(port))
	if !p.allows(host, port) {
		return netip.AddrPort{}, &refusal{http.StatusForbidden,
			fmt.Sprintf("%s is not allowed by this run's network policy; add it to network.allow", dest)}
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		addrs, err = p.resolve(ctx, host)
		if err != nil || len(addrs) == 0 {
			return netip.AddrPort{}, &refusal{http.StatusBadGateway, fmt.Sprintf("cannot resolve %s: %v", host, err)}
		}
	}
	for _, a := range addrs {
		if what := p.denied(a.Unmap().WithZone(""), port); what != "" {
			return netip.AddrPort{}, &refusal{http.StatusForbidden,
				fmt.Sprintf("%s resolves to %s, %s, which a sandbox may not reach", dest, a, what)}
		}
	}
	return netip.AddrPortFrom(addrs[0].Unmap().WithZone(""), uint16(port)), nil
}

func (p *Proxy) allows(host string, port int) bool {
	for _, r := range p.policy.Allow {
		if r.Matches(host, port) {
			return true
		}
	}
	return false
}

func (p *Proxy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if p.opts.Resolve != nil {
		return p.opts.Resolve(ctx, host)
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// Ranges that netip's predicates do not name.
var (
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	cgnat       = netip.MustParsePrefix("100.64.0.0/10")
	broadcast   = netip.MustParseAddr("255.255.255.255")
)

// denied says which denied range a holds ("" if none, or if an Opening
// covers it and port): the host's own networks and addresses, the cloud
// metadata service (169.254.169.254 is link-local) and whatever is not a
// single public host. An IPv6 address that carries an IPv4 one (mapped,
// NAT64, 6to4, Teredo: embeddedV4) is judged by that too, so
// ::ffff:0:7f00:1 is loopback and 64:ff9b::a9fe:a9fe the metadata service.
func (p *Proxy) denied(a netip.Addr, port int) string {
	a = a.WithZone("")
	if what := p.deniedOne(a, port); what != "" {
		return what
	}
	for _, v4 := range embeddedV4(a) {
		if what := p.deniedOne(v4, port); what != "" {
			return fmt.Sprintf("carrying %s, %s", v4, what)
		}
	}
	return ""
}

// deniedOne is denied for a itself.
func (p *Proxy) deniedOne(a netip.Addr, port int) string {
	var what string
	switch {
	case a.IsLoopback():
		what = "a loopback address"
	case a.IsUnspecified(), thisNetwork.Contains(a):
		what = "an unspecified address"
	case a.IsPrivate():
		what = "a private address"
	case cgnat.Contains(a):
		what = "a shared (CGNAT) address"
	case a.IsLinkLocalUnicast():
		what = "a link-local address (cloud metadata lives here)"
	case a.IsMulticast(), a == broadcast:
		what = "a multicast or broadcast address"
	default:
		for _, h := range p.hostAddrs {
			if h.Unmap().WithZone("") == a {
				what = "one of the host's own addresses"
			}
		}
	}
	if what == "" {
		return ""
	}
	for _, o := range p.opts.Open {
		if o.Prefix.Contains(a) && (o.Port == 0 || o.Port == port) {
			return ""
		}
	}
	return what
}

// hostAddrs are the addresses of the host's interfaces.
func hostAddrs() []netip.Addr {
	ifas, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var addrs []netip.Addr
	for _, ifa := range ifas {
		if pfx, err := netip.ParsePrefix(ifa.String()); err == nil {
			addrs = append(addrs, pfx.Addr())
		}
	}
	return addrs
}

// splitHostPort reads a CONNECT's "host:port", where the port is required.
func splitHostPort(hostport string) (string, int, bool) {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0, false
	}
	port, err := strconv.Atoi(ps)
	return host, port, err == nil && port > 0 && port < 65536 && host != ""
}
