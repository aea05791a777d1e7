package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// ParseRule parses one allow entry: "pypi.org", "*.pythonhosted.org",
// "api.github.com:443", "10.1.2.3:8080" or "[::1]:80". Names are lowercased
// and lose a trailing dot. The error names the entry and how to fix it,
// since it reaches whoever wrote the policy.
func ParseRule(s string) (Rule, error) {
	in := s
	s = strings.TrimSpace(s)
	bad := func(format string, a ...any) (Rule, error) {
		return Rule{}, fmt.Errorf("%w %q: %s", ErrInvalidRule, in, fmt.Sprintf(format, a...))
	}
	if s == "" {
		return bad(`empty; write a host name such as "pypi.org"`)
	}
	if strings.Contains(s, "://") || strings.ContainsAny(s, "/?#@") {
		return bad(`a rule is host[:port], not a URL; write only the host, e.g. "pypi.org" or "pypi.org:443"`)
	}
	host, port := s, 0
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return bad("port %q is not in 1-65535; write host:port with a valid port, or no port for 80 and 443", p)
		}
		host, port = h, n
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	} else if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
		return bad("cannot split host and port (%v); write host, host:port or [ipv6]:port", err)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return bad("an IP with a zone is not a destination; drop the %%%s", a.Zone())
		}
		return Rule{Host: a.Unmap().String(), Port: port}, nil
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	name := host
	switch {
	case host == "*":
		return bad(`"*" would allow the whole internet; list the hosts, e.g. "*.pythonhosted.org"`)
	case strings.HasPrefix(host, "*."):
		name = host[2:]
		if !strings.Contains(name, ".") {
			return bad("a wildcard over a single label (%s) is too wide; name the domain, e.g. \"*.example.%s\"", name, name)
		}
	}
	if strings.Contains(name, "*") {
		return bad(`a wildcard is allowed only as the leftmost label, as in "*.example.org"`)
	}
	if err := checkName(name); err != nil {
		return bad("%v", err)
	}
	return Rule{Host: host, Port: port}, nil
}

// checkName accepts a DNS name of letters, digits, hyphens and
// underscores (seen in real service names), labels of 1-63 bytes.
func checkName(name string) error {
	if len(name) > 253 {
		return fmt.Errorf("the name is longer than 253 bytes")
	}
	for l := range strings.SplitSeq(name, ".") {
		if l == "" || len(l) > 63 {
			return fmt.Errorf("label %q must be 1-63 bytes; check for a doubled dot", l)
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with a hyphen", l)
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("label %q has %q; names are letters, digits and hyphens", l, c)
			}
		}
	}
	return nil
}

// String is the rule as ParseRule reads it back.
func (r Rule) String() string {
	if r.Port == 0 {
		if strings.Contains(r.Host, ":") {
			return "[" + r.Host + "]"
		}
		return r.Host
	}
	return net.JoinHostPort(r.Host, strconv.Itoa(r.Port))
}

// Matches reports whether the rule allows host:port. Port 0 stands for
// the web's two ports, 80 and 443.
func (r Rule) Matches(host string, port int) bool {
	return r.coversPort(port) && r.matchesHost(normHost(host))
}

func (r Rule) coversPort(port int) bool {
	if r.Port == 0 {
		return port == 80 || port == 443
	}
	return port == r.Port
}

// matchesHost: "*.x.org" matches exactly one more label ("a.x.org"), not
// "x.org" nor "a.b.x.org", so a rule never reaches further than it reads.
func (r Rule) matchesHost(host string) bool {
	if suffix, ok := strings.CutPrefix(r.Host, "*"); ok {
		label, ok := strings.CutSuffix(host, suffix)
		return ok && label != "" && !strings.Contains(label, ".")
	}
	return host == r.Host
}

// normHost puts a host as a request names it into the form ParseRule
// gives: lowercase, no trailing dot, IPs unmapped and canonical.
func normHost(host string) string {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap().WithZone("").String()
	}
	return host
}

// Within reports whether a caller's rule is allowed by the operator's
// list: an exact host falls within an operator's equal host or wildcard;
// a caller's wildcard only within the identical operator wildcard; and
// the operator's port covers the caller's (operator port 0 covers 0, 80
// and 443).
func (r Rule) Within(allowed []Rule) bool {
	for _, a := range allowed {
		hostOK := a.Host == r.Host || !strings.HasPrefix(r.Host, "*") && a.matchesHost(r.Host)
		portOK := a.Port == r.Port || a.Port == 0 && (r.Port == 80 || r.Port == 443)
		if hostOK && portOK {
			return true
		}
	}
	return false
}

// overlaps says whether some host:port matches both r and o (a wildcard
// against a name it covers, or the same name; ports alike).
func (r Rule) overlaps(o Rule) bool {
	portsMeet := r.Port == o.Port || r.Port == 0 && (o.Port == 80 || o.Port == 443) || o.Port == 0 && (r.Port == 80 || r.Port == 443)
	if !portsMeet {
		return false
	}
	switch {
	case r.Host == o.Host:
		return true
	case strings.HasPrefix(r.Host, "*."):
		// One-label wildcards of different suffixes share no name.
		return r.matchesHost(o.Host)
	default:
		return o.matchesHost(r.Host)
	}
}
