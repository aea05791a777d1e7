package config

import (
	"strings"
	"testing"
)

func TestSecurityConfig(t *testing.T) {
	if c, err := Load("", nil); err != nil || c.Security.Landlock != "auto" {
		t.Fatalf("default: %+v %v", c.Security, err)
	}
	c, err := Load(writeConf(t, "[security]\nlandlock = \"required\"\n"), nil)
	if err != nil || c.Security.Landlock != "required" {
		t.Fatalf("required: %+v %v", c.Security, err)
	}
	next := c
	next.Security.Landlock = "off"
	if keys := c.RestartKeys(next); strings.Join(keys, ",") != "security.landlock" {
		t.Errorf("restart keys %v", keys)
	}
	for _, tc := range []struct{ conf, want string }{
		{"[security]\nlandlock = \"on\"\n", "nsbox.conf:2: security.landlock: \"on\": want \"auto\", \"required\" or \"off\""},
		{"[security]\nlandlock = true\n", "security.landlock"},
		{"[security]\nseccomp = \"x\"\n", "unknown key; [security] has landlock"},
		{"security = 1\n", "must be a table ([security])"},
	} {
		_, err := Load(writeConf(t, tc.conf), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error containing %q", tc.conf, err, tc.want)
		}
	}
}
