// Package netconf is the daemon configuration's [network] section:
// [network], [network.hosts] and [network.secrets.NAME], read key by key
// from the TOML file and checked as a whole (docs/NETWORK.md). The
// package daemon/config holds it as Config.Network.
package netconf

import (
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/config/internal/tomlval"
	"github.com/nsbox/nsbox/daemon/egress"
	"github.com/nsbox/nsbox/daemon/policy"
)

// Config is [network], [network.hosts] and [network.secrets.NAME]:
// what runs may ask the egress proxy for (docs/NETWORK.md). Without an
// allow list no run has network.
type Config struct {
	// Allow are the destinations a run may be allowed; Secrets the named
	// secrets it may ask for; the caps are each run's (policy.Network).
	policy.Network
	// Open are denied address ranges opened on purpose ("10.0.0.0/8",
	// "127.0.0.1:8080").
	Open []egress.Opening
	// Hosts resolve names before DNS does ([network.hosts]: an internal
	// mirror, or a test server on 127.0.0.1).
	Hosts map[string]netip.Addr
	// CacheBytes caps the shared package cache under
	// <state_dir>/egress/cache; 0 turns it off.
	CacheBytes int64
	// CacheHosts are the package hosts whose TLS the proxy terminates so
	// that their files can be cached (egress.Options.Intercept).
	CacheHosts []egress.Rule

	secretFiles map[string]bool // secrets whose file key was given
}

// Default is [network] with no file: no network, and the caps and the
// package cache's size and hosts that apply once allow names hosts.
func Default() Config {
	return Config{Network: policy.Network{MaxConnections: 1000, MaxBytes: 4 << 30}, CacheBytes: 2 << 30,
		CacheHosts: []egress.Rule{{Host: "pypi.org"}, {Host: "files.pythonhosted.org"}}}
}

// String is the restart-only part, for config's RestartKeys.
func (n Config) String() string {
	return fmt.Sprintf("open=%v hosts=%v cache=%d cache_hosts=%v", n.Open, n.Hosts, n.CacheBytes, n.CacheHosts)
}

// SetKey stores a key of [network] and its subtables; key is the whole
// path, "network" first ({"network", "allow"}). The error says what is
// wrong with v.
func (n *Config) SetKey(key []string, v *unstable.Node) error {
	switch {
	case len(key) == 2 && key[1] == "allow":
		l, err := tomlval.Strings(v, `["pypi.org", "*.pythonhosted.org"]`)
		if err != nil {
			return err
		}
		n.Allow = nil
		for _, s := range l {
			r, err := egress.ParseRule(s)
			if err != nil {
				return err
			}
			n.Allow = append(n.Allow, r)
		}
	case len(key) == 2 && key[1] == "cache_hosts":
		l, err := tomlval.Strings(v, `["pypi.org", "files.pythonhosted.org"]`)
		if err != nil {
			return err
		}
		n.CacheHosts = []egress.Rule{}
		for _, s := range l {
			r, err := egress.ParseRule(s)
			if err != nil {
				return err
			}
			n.CacheHosts = append(n.CacheHosts, r)
		}
	case len(key) == 2 && key[1] == "open":
		l, err := tomlval.Strings(v, `["127.0.0.1:8080", "10.0.0.0/8"]`)
		if err != nil {
			return err
		}
		n.Open = nil
		for _, s := range l {
			o, err := parseOpening(s)
			if err != nil {
				return err
			}
			n.Open = append(n.Open, o)
		}
	case len(key) == 2 && key[1] == "max_connections":
		c, err := tomlval.IntIn(v, 0, 1<<20, "(no cap)")
		if err != nil {
			return err
		}
		n.MaxConnections = int(c)
	case len(key) == 2 && (key[1] == "max_bytes" || key[1] == "cache"):
		b, err := tomlval.Size(v)
		if err != nil {
			return err
		}
		if key[1] == "cache" {
			n.CacheBytes = b
		} else {
			n.MaxBytes = b
		}
	case len(key) == 2 && (key[1] == "hosts" || key[1] == "secrets"):
		return fmt.Errorf("must be a table ([network.%s])", key[1])
	case len(key) == 3 && key[1] == "hosts":
		s, err := tomlval.String(v)
		if err != nil {
			return err
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return fmt.Errorf("%q is not an IP address", s)
		}
		if n.Hosts == nil {
			n.Hosts = map[string]netip.Addr{}
		}
		n.Hosts[strings.ToLower(strings.TrimSuffix(key[2], "."))] = a
	case len(key) == 4 && key[1] == "secrets":
		return n.setSecretKey(key[2], key[3], v)
	default:
		return fmt.Errorf("unknown key; [network] has allow, open, max_connections, max_bytes, cache and cache_hosts, with the tables [network.hosts] and [network.secrets.NAME] (file, hosts)")
	}
	return nil
}

// setSecretKey stores a key of [network.secrets.NAME]: file (a root-only
// file holding the value) or hosts (where the value may be sent).
func (n *Config) setSecretKey(name, key string, v *unstable.Node) error {
	if err := ValidSecretName(name); err != nil {
		return err
	}
	if n.Secrets == nil {
		n.Secrets = map[string]egress.Secret{}
	}
	s := n.Secrets[name]
	s.Name = name
	switch key {
	case "file":
		path, err := tomlval.String(v)
		if err != nil {
			return err
		}
		if n.secretFiles == nil {
			n.secretFiles = map[string]bool{}
		}
		n.secretFiles[name] = true // an unreadable one is reported once, here
		val, err := readSecret(path)
		if err != nil {
			return err
		}
		s.Value = val
	case "hosts":
		l, err := tomlval.Strings(v, `["api.github.com"]`)
		if err != nil {
			return err
		}
		s.Hosts = nil
		for _, h := range l {
			r, err := egress.ParseRule(h)
			if err != nil {
				return err
			}
			s.Hosts = append(s.Hosts, r)
		}
	default:
		return fmt.Errorf("unknown key; [network.secrets.%s] has file and hosts", name)
	}
	n.Secrets[name] = s
	return nil
}

// ValidSecretName: a secret's name is also the sandbox's variable name.
func ValidSecretName(name string) error {
	if name == "" || len(name) > 64 || strings.Trim(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != "" || name[0] >= '0' && name[0] <= '9' {
		return fmt.Errorf("secret name %q: use 1 to 64 of A-Z, 0-9 and _ (it is the sandbox's variable name), not starting with a digit", name)
	}
	return nil
}

// readSecret reads a secret's value from a file only root may read.
func readSecret(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("secret file: %v", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("secret file %s has mode %v: it must be a regular file only its owner may read (chmod 600 %s)", path, st.Mode(), path)
	}
	b := make([]byte, 64<<10)
	k, _ := f.Read(b)
	val := strings.TrimRight(string(b[:k]), "\r\n")
	if val == "" {
		return "", fmt.Errorf("secret file %s is empty", path)
	}
	return val, nil
}

// parseOpening parses an [network] open entry: an address or prefix, and
// an optional port ("127.0.0.1:8080", "[::1]:80", "10.0.0.0/8").
func parseOpening(s string) (egress.Opening, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return egress.Opening{Prefix: netip.PrefixFrom(ap.Addr(), ap.Addr().BitLen()), Port: int(ap.Port())}, nil
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		return egress.Opening{Prefix: p.Masked()}, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return egress.Opening{Prefix: netip.PrefixFrom(a, a.BitLen())}, nil
	}
	return egress.Opening{}, fmt.Errorf("%q: give an address, an address:port or a prefix (\"127.0.0.1:8080\", \"10.0.0.0/8\")", s)
}

// Check finds what is wrong with [network] as a whole, and with the
// network lists of profiles (the daemon's, [profiles.NAME] applied),
// reporting each problem through bad with the key it is about.
func (n Config) Check(profiles []agentapi.Profile, bad func(key, format string, args ...any)) {
	for name, s := range n.Secrets {
		key := "network.secrets." + name
		switch {
		case s.Value == "" && !n.secretFiles[name]:
			bad(key, "has no file: give file = \"/etc/nsbox/secrets/%s\" (mode 600)", strings.ToLower(name))
		case len(s.Hosts) == 0:
			bad(key, "has no hosts: give hosts = [\"api.example.com\"], the hosts its value may be sent to")
		}
		for _, h := range s.Hosts {
			if !h.Within(n.Allow) {
				bad(key+".hosts", "%s is not within [network] allow (%s), so no run could use the secret; %s", h, ruleListOrNone(n.Allow), secretHostFix(h, n.Allow))
			}
		}
	}
	for _, pr := range profiles {
		if pr.Network == nil {
			continue
		}
		if !n.Enabled() {
			bad("profiles."+pr.Name+".network", "the profile has network but [network] allows none; add the hosts to [network] allow")
			continue
		}
		for _, h := range pr.Network.Allow {
			r, err := egress.ParseRule(h)
			if err != nil {
				bad("profiles."+pr.Name+".network", "%v", err)
			} else if !r.Within(n.Allow) {
				bad("profiles."+pr.Name+".network", "%q is not in [network] allow", h)
			}
		}
	}
}

// secretHostFix says how to make a secret's host h fit [network] allow:
// most often the secret is bound to a host without a port (80 and 443)
// while allow names it with :443.
func secretHostFix(h egress.Rule, allow []egress.Rule) string {
	for _, port := range []int{443, 80} {
		if h.Port == 0 && (egress.Rule{Host: h.Host, Port: port}).Within(allow) {
			return fmt.Sprintf("[network] allow has it on port %d only: write hosts = [\"%s\"] (secrets are swapped on HTTPS), or allow %q", port, egress.Rule{Host: h.Host, Port: 443}, h)
		}
	}
	return fmt.Sprintf("add %q to [network] allow", h)
}

func ruleListOrNone(rs []egress.Rule) string {
	if len(rs) == 0 {
		return "none"
	}
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return strings.Join(out, ", ")
}
