package config

import (
	"strings"
	"testing"

	"github.com/nsbox/nsbox/daemon/volume"
)

func TestVolumesConfig(t *testing.T) {
	if c, err := Load("", nil); err != nil || c.Volumes.OwnerID != volume.DefaultOwnerID || c.Volumes.OwnerID == 1000 {
		t.Fatalf("default: %+v %v", c.Volumes, err)
	}
	c, err := Load(writeConf(t, "[volumes]\nowner_id = 900000000\n"), nil)
	if err != nil || c.Volumes.OwnerID != 900000000 {
		t.Fatalf("chosen: %+v %v", c.Volumes, err)
	}
	next := c
	next.Volumes.OwnerID = 900000001
	if keys := c.RestartKeys(next); strings.Join(keys, ",") != "volumes.owner_id" {
		t.Errorf("restart keys %v", keys)
	}
	for _, tc := range []struct{ conf, want string }{
		{"[volumes]\nowner_id = 0\n", "nsbox.conf:2: volumes.owner_id: 0: want 1 to 4294967294"},
		{"[volumes]\nowner_id = -5\n", "volumes.owner_id: -5"},
		{"[volumes]\nowner_id = 4294967295\n", "volumes.owner_id: 4294967295"},
		{"[volumes]\nowner_id = 65534\n", "overflow id"},
		{"[volumes]\nowner_id = 1342177281\n", "sandboxes' host ids"},
		{"[volumes]\nowner_id = 1610612736\n", "zygotes' host ids"},
		{"[volumes]\nowner_id = \"1000\"\n", "volumes.owner_id"},
		{"[volumes]\nowner = 1\n", "unknown key; [volumes] has owner_id"},
		{"volumes = 1\n", "must be a table ([volumes])"},
	} {
		_, err := Load(writeConf(t, tc.conf), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error containing %q", tc.conf, err, tc.want)
		}
	}
}
