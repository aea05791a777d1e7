package egress

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// TestEmbeddedIPv4: a name resolving to an IPv6 form that carries a
// denied IPv4 address is refused, one case per form; the same forms of a
// public address pass.
func TestEmbeddedIPv4(t *testing.T) {
	for _, tc := range []struct {
		form, addr, carries string
	}{
		{"IPv4-compatible ::/96", "::7f00:1", "127.0.0.1"},
		{"IPv4-compatible ::/96", "::a9fe:a9fe", "169.254.169.254"},
		{"IPv4-mapped ::ffff:0:0/96", "::ffff:a00:1", "10.0.0.1"},
		{"SIIT ::ffff:0:0:0/96", "::ffff:0:7f00:1", "127.0.0.1"},
		{"SIIT ::ffff:0:0:0/96", "::ffff:0:a9fe:a9fe", "169.254.169.254"},
		{"NAT64 64:ff9b::/96", "64:ff9b::7f00:1", "127.0.0.1"},
		{"NAT64 64:ff9b::/96", "64:ff9b::c0a8:101", "192.168.1.1"},
		{"local NAT64 64:ff9b:1::/48", "64:ff9b:1:7f00:0:100::", "127.0.0.1"},
		{"local NAT64 64:ff9b:1::/48", "64:ff9b:1:a9fe:a9:fe00::", "169.254.169.254"},
		{"6to4 2002::/16", "2002:7f00:1::", "127.0.0.1"},
		{"6to4 2002::/16", "2002:a9fe:a9fe:1::1", "169.254.169.254"},
		{"Teredo 2001::/32 client", "2001:0:c633:6401::80ff:fffe", "127.0.0.1"},
		{"Teredo 2001::/32 client", "2001:0:c633:6401:8000:1234:5601:5601", "169.254.169.254"},
		{"Teredo 2001::/32 server", "2001:0:a00:1::f7f7:f7f7", "10.0.0.1"},
	} {
		t.Run(tc.form+" "+tc.addr, func(t *testing.T) {
			tn := &testNet{names: map[string]string{"embed.test": tc.addr}}
			p, addr := startProxy(t, tn.options(), Policy{Allow: mustRules(t, "embed.test")})
			code, body, err := get(t, proxiedClient(addr, nil), "http://embed.test/")
			a := netip.MustParseAddr(tc.addr)
			want := fmt.Sprintf("resolves to %s, carrying %s, ", a, tc.carries)
			if a.Is4In6() { // unmapped before it is judged
				want = fmt.Sprintf("resolves to %s, a private address", a)
			}
			if err != nil || code != http.StatusForbidden || !strings.Contains(body, want) {
				t.Errorf("got %d %q %v; want 403 with %q", code, body, err, want)
			}
			rep := p.Close()
			if len(rep.Records) != 1 || rep.Records[0].Allowed || rep.Records[0].Addr != "" {
				t.Errorf("report %+v", rep)
			}
		})
	}
}

// TestEmbeddedPublicIPv4: the forms of a public IPv4 address are not
// refused for what they carry.
func TestEmbeddedPublicIPv4(t *testing.T) {
	p, err := New(&Options{HostAddrs: []netip.Addr{}}, "r", Policy{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, a := range []string{
		"::808:808", "::ffff:0:808:808", "64:ff9b::808:808", "64:ff9b:1:808:8:800::",
		"2002:808:808::1", "2001:0:c633:6401::f7f7:f7f7", "2606:4700::1111",
	} {
		if what := p.denied(netip.MustParseAddr(a), 80); what != "" {
			t.Errorf("%s denied: %s", a, what)
		}
	}
}
