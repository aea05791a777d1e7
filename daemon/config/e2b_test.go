package config

import (
	"strings"
	"testing"
)

func TestE2BConfig(t *testing.T) {
	c, err := Load(writeConf(t, `
[e2b]
listen = "127.0.0.1:49999"
keys_file = "/etc/nsbox/e2b-keys"
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.E2B.Listen != "127.0.0.1:49999" || c.E2B.KeysFile != "/etc/nsbox/e2b-keys" || c.E2B.NonLoopback {
		t.Fatalf("%+v", c.E2B)
	}
	// Flags (overrides) set both keys; off by default.
	if c, err := Load("", nil); err != nil || c.E2B.Listen != "" {
		t.Fatalf("default: %+v %v", c.E2B, err)
	}
	c, err = Load("", []Override{{Key: "e2b.listen", Value: "[::1]:49999"}, {Key: "e2b.keys_file", Value: "/k"}})
	if err != nil || c.E2B.Listen != "[::1]:49999" || c.E2B.KeysFile != "/k" {
		t.Fatalf("overrides: %+v %v", c.E2B, err)
	}
	// Another address only on purpose.
	c, err = Load(writeConf(t, "[e2b]\nlisten = \"0.0.0.0:49999\"\nkeys_file = \"/k\"\nnon_loopback = true\n"), nil)
	if err != nil || !c.E2B.NonLoopback {
		t.Fatalf("non_loopback: %+v %v", c.E2B, err)
	}
	// A change needs a restart.
	next := c
	next.E2B.Listen = "127.0.0.1:1"
	if keys := c.RestartKeys(next); strings.Join(keys, ",") != "e2b.listen" {
		t.Errorf("restart keys %v", keys)
	}
}

func TestE2BConfigErrors(t *testing.T) {
	for _, tc := range []struct{ conf, want string }{
		{"[e2b]\nlisten = \"0.0.0.0:49999\"\nkeys_file = \"/k\"\n", "nsbox.conf:2: e2b.listen: \"0.0.0.0:49999\" is not a loopback address"},
		{"[e2b]\nlisten = \"10.0.0.1:49999\"\nkeys_file = \"/k\"\n", "non_loopback = true"},
		{"[e2b]\nlisten = \"127.0.0.1:49999\"\n", "e2b.keys_file: [e2b] listen needs keys_file"},
		{"[e2b]\nlisten = \"49999\"\nkeys_file = \"/k\"\n", "want HOST:PORT"},
		{"[e2b]\nport = 1\n", "nsbox.conf:2: e2b.port: unknown key; [e2b] has listen, keys_file, non_loopback and key_requests"},
		{"[e2b]\nnon_loopback = \"yes\"\n", "want true or false"},
		{"e2b = 1\n", "must be a table ([e2b])"},
	} {
		_, err := Load(writeConf(t, tc.conf), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error containing %q", tc.conf, err, tc.want)
		}
	}
}
