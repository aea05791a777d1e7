package egress

import (
	"context"
	"net"
	"net/netip"
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

// terminate is not written yet: the tunnel is refused.
func (p *Proxy) terminate(ctx context.Context, sandbox net.Conn, rec *Record, addr netip.AddrPort, secrets []Secret) {
	rec.Allowed, rec.Reason = false, "secrets are not implemented yet"
}
