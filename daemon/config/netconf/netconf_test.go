package netconf_test

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/config"
	"github.com/nsbox/nsbox/daemon/egress"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/policy"
)

func TestNetworkConfig(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "gh")
	os.WriteFile(secret, []byte("ghp_value\n"), 0o600)
	c, err := config.Load(writeConf(t, `
[network]
allow = ["pypi.org", "*.pythonhosted.org", "api.github.com:443"]
open = ["127.0.0.1:8080", "10.0.0.0/8"]
max_connections = 50
max_bytes = "1G"
cache = "512M"

[network.hosts]
"mirror.internal" = "127.0.0.1"

[network.secrets.GITHUB_TOKEN]
file = "`+secret+`"
hosts = ["api.github.com:443"]

[profiles.pypi]
network = ["pypi.org", "files.pythonhosted.org"]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	n := c.Network
	if len(n.Allow) != 3 || n.MaxConnections != 50 || n.MaxBytes != 1<<30 || n.CacheBytes != 512<<20 {
		t.Errorf("network %+v", n)
	}
	if len(n.Open) != 2 || n.Open[0] != (egress.Opening{Prefix: netip.MustParsePrefix("127.0.0.1/32"), Port: 8080}) || n.Open[1].Prefix.String() != "10.0.0.0/8" {
		t.Errorf("open %+v", n.Open)
	}
	if n.Hosts["mirror.internal"] != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("hosts %+v", n.Hosts)
	}
	if s := n.Secrets["GITHUB_TOKEN"]; s.Value != "ghp_value" || len(s.Hosts) != 1 {
		t.Errorf("secret %+v", s)
	}

	// The policy a run is checked against: the request's over the profile's.
	pol, err := policy.New(c.Policy())
	if err != nil {
		t.Fatal(err)
	}
	j, err := pol.Validate(&agentapi.RunRequest{Argv: []string{"true"}, Profile: "pypi"})
	if err != nil || j.Network == nil || len(j.Network.Allow) != 2 || j.Network.MaxConnections != 50 {
		t.Fatalf("profile network: %+v %v", j, err)
	}
	j, err = pol.Validate(&agentapi.RunRequest{Argv: []string{"true"}, Network: &agentapi.Network{Allow: []string{"x.pythonhosted.org", "api.github.com:443"}, Secrets: []string{"GITHUB_TOKEN"}, MaxBytes: 1 << 20}})
	if err != nil || len(j.Network.Secrets) != 1 || j.Network.Secrets[0].Value != "ghp_value" || j.Network.MaxBytes != 1<<20 {
		t.Fatalf("request network: %+v %v", j, err)
	}
	for _, c := range []struct {
		net        agentapi.Network
		field, msg string
	}{
		{agentapi.Network{Allow: []string{"evil.com"}}, "network.allow[0]", "not among the hosts"},
		{agentapi.Network{Allow: []string{"*"}}, "network.allow[0]", ""},
		{agentapi.Network{Allow: []string{"*.com"}}, "network.allow[0]", ""},
		{agentapi.Network{Allow: []string{"api.github.com:22"}}, "network.allow[0]", "not among the hosts"},
		{agentapi.Network{Allow: []string{"pypi.org"}, Secrets: []string{"AWS_KEY"}}, "network.secrets[0]", "GITHUB_TOKEN"},
		{agentapi.Network{Allow: []string{"pypi.org"}, MaxConnections: 51}, "network.max_connections", "above"},
		// A secret whose host the run does not allow: the proxy refused
		// the policy, a 500 for every such run.
		{agentapi.Network{Allow: []string{"pypi.org"}, Secrets: []string{"GITHUB_TOKEN"}}, "network.secrets[0]",
			`"GITHUB_TOKEN" is bound to api.github.com:443, which network.allow does not reach; add "api.github.com:443" to network.allow`},
		{agentapi.Network{}, "network.allow", "empty"},
	} {
		_, err := pol.Validate(&agentapi.RunRequest{Argv: []string{"true"}, Network: &c.net})
		var fe *errdefs.FieldError
		if !errorsAs(err, &fe) || fe.Field != c.field || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%+v: got %v, want a field error on %s mentioning %q", c.net, err, c.field, c.msg)
		}
	}

	// A daemon without [network] refuses any network and says how to
	// configure it.
	none, _ := policy.New(config.Default().Policy())
	_, err = none.Validate(&agentapi.RunRequest{Argv: []string{"true"}, Network: &agentapi.Network{Allow: []string{"pypi.org"}}})
	if err == nil || !strings.Contains(err.Error(), "[network]") {
		t.Errorf("no network configured: %v", err)
	}
}

func TestNetworkConfigErrors(t *testing.T) {
	loose := filepath.Join(t.TempDir(), "loose")
	os.WriteFile(loose, []byte("v"), 0o644)
	tight := filepath.Join(t.TempDir(), "tight")
	os.WriteFile(tight, []byte("v"), 0o600)
	for _, c := range []struct{ conf, want string }{
		{"[network]\nallow = [\"*\"]\n", "network.allow"},
		{"[network]\nallow = [\"*.com\"]\n", "network.allow"},
		{"[network]\nopen = [\"nope\"]\n", "network.open"},
		{"[network.hosts]\n\"a.test\" = \"not-an-ip\"\n", "not an IP"},
		{"[network]\nallow = [\"a.org\"]\n[network.secrets.TOKEN]\nfile = \"" + loose + "\"\nhosts = [\"a.org\"]\n", "chmod 600"},
		{"[network]\nallow = [\"a.org\"]\n[network.secrets.TOKEN]\nhosts = [\"a.org\"]\n", "has no file"},
		{"[network.secrets.lower]\nhosts = [\"a.org\"]\n", "secret name"},
		{"[profiles.p]\nnetwork = [\"a.org\"]\n", "allows none"},
		{"[network]\nallow = [\"a.org\"]\n[profiles.p]\nnetwork = [\"b.org\"]\n", "not in [network] allow"},
		{"[network]\nallow = [\"a.org:443\"]\n[network.secrets.TOKEN]\nfile = \"" + tight + "\"\nhosts = [\"a.org\"]\n",
			`network.secrets.TOKEN.hosts: a.org is not within [network] allow (a.org:443), so no run could use the secret; [network] allow has it on port 443 only: write hosts = ["a.org:443"]`},
		{"[network]\nallow = [\"a.org\"]\n[network.secrets.TOKEN]\nfile = \"" + tight + "\"\nhosts = [\"b.org\"]\n", `add "b.org" to [network] allow`},
	} {
		_, err := config.Load(writeConf(t, c.conf), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error mentioning %q", c.conf, err, c.want)
		}
	}
}

func errorsAs(err error, fe **errdefs.FieldError) bool { return errors.As(err, fe) }

// writeConf writes content as a config file and returns its path.
func writeConf(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "nsbox.conf")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
