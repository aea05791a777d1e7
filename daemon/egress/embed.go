package egress

import "net/netip"

// The IPv6 forms that carry an IPv4 address, which a NAT64, SIIT, 6to4
// or Teredo path on the host (or its network) may translate and deliver
// to that IPv4 address: 64:ff9b::7f00:1 can be 127.0.0.1.
var (
	v4Compatible = netip.MustParsePrefix("::/96")           // RFC 4291, deprecated
	v4Mapped     = netip.MustParsePrefix("::ffff:0:0/96")   // RFC 4291
	siit         = netip.MustParsePrefix("::ffff:0:0:0/96") // RFC 2765
	nat64        = netip.MustParsePrefix("64:ff9b::/96")    // RFC 6052
	nat64Local   = netip.MustParsePrefix("64:ff9b:1::/48")  // RFC 8215
	sixToFour    = netip.MustParsePrefix("2002::/16")       // RFC 3056
	teredo       = netip.MustParsePrefix("2001::/32")       // RFC 4380
)

// embeddedV4 returns the IPv4 addresses an IPv6 address carries, in each
// of the forms above; none for any other address.
//
// 64:ff9b:1::/48 is a local-use NAT64 prefix: RFC 6052's /48 layout puts
// the IPv4 address's first two bytes in bits 48-63 and the last two in
// bits 72-87, around the zero u-octet (bits 64-71). Teredo carries two:
// the server's in bits 32-63 and the client's, each bit inverted, in the
// last 32 (the client's is where the traffic is finally delivered).
func embeddedV4(a netip.Addr) []netip.Addr {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	v4 := func(x, y, z, w byte) netip.Addr { return netip.AddrFrom4([4]byte{x, y, z, w}) }
	switch {
	case v4Compatible.Contains(a), v4Mapped.Contains(a), siit.Contains(a), nat64.Contains(a):
		return []netip.Addr{v4(b[12], b[13], b[14], b[15])}
	case nat64Local.Contains(a):
		return []netip.Addr{v4(b[6], b[7], b[9], b[10])}
	case sixToFour.Contains(a):
		return []netip.Addr{v4(b[2], b[3], b[4], b[5])}
	case teredo.Contains(a):
		return []netip.Addr{v4(b[4], b[5], b[6], b[7]), v4(^b[12], ^b[13], ^b[14], ^b[15])}
	}
	return nil
}
