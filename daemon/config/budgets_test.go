package config

import (
	"errors"
	"strings"
	"testing"
)

// TestBudgets: [budgets] and [e2b] key_requests are read, their defaults
// kept when absent, and a change is one that needs a restart.
func TestBudgets(t *testing.T) {
	def, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if def.Budgets != (BudgetsConfig{ResultBytes: 256 << 20, BodyBytes: 128 << 20}) || def.E2B.KeyRequests != 0 {
		t.Errorf("defaults: %+v, e2b.key_requests %d; want results 256 MiB, bodies 128 MiB, the rest derived (0)", def.Budgets, def.E2B.KeyRequests)
	}
	c, err := Load(writeConf(t, "[budgets]\nresults = \"1G\"\nbodies = 268435456\npeer_conns_per_second = 16\n[e2b]\nkey_requests = 4\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Budgets != (BudgetsConfig{ResultBytes: 1 << 30, BodyBytes: 256 << 20, PeerConnsPerSecond: 16}) || c.E2B.KeyRequests != 4 {
		t.Errorf("got %+v, e2b.key_requests %d", c.Budgets, c.E2B.KeyRequests)
	}
	keys := strings.Join(def.RestartKeys(c), " ")
	if keys != "budgets e2b.key_requests" {
		t.Errorf("restart keys %q, want budgets and e2b.key_requests", keys)
	}
}

// TestBudgetsErrors: a value out of range names its key and line, the
// range, the default and a value to write instead; an unknown key names
// the table's keys.
func TestBudgetsErrors(t *testing.T) {
	for _, tc := range []struct {
		conf, key string
		want      []string
	}{
		{"[budgets]\nresults = \"8M\"\n", "budgets.results", []string{":2: budgets.results: 8 MiB: must be between 16 MiB and 64 GiB", "default is 256 MiB", `results = "256M"`}},
		{"[budgets]\nresults = \"65G\"\n", "budgets.results", []string{"65 GiB: must be between 16 MiB and 64 GiB"}},
		{"[budgets]\nbodies = \"32M\"\n", "budgets.bodies", []string{"32 MiB: must be between 64 MiB and 64 GiB", "default is 128 MiB", `bodies = "128M"`}},
		{"[budgets]\nbodies = \"lots\"\n", "budgets.bodies", []string{"lots"}},
		{"[budgets]\npeer_conns_per_second = 0\n", "budgets.peer_conns_per_second", []string{"0: must be between 1 and 65536", "leave it out"}},
		{"[budgets]\nconns = 3\n", "budgets.conns", []string{"[budgets] has results, bodies and peer_conns_per_second"}},
		{"budgets = 3\n", "budgets", []string{"must be a table ([budgets])"}},
		{"[e2b]\nkey_requests = -1\n", "e2b.key_requests", []string{"-1: must be between 1 and 65536", "leave it out"}},
	} {
		t.Run(tc.key, func(t *testing.T) {
			_, err := Load(writeConf(t, tc.conf), nil)
			var ce *Errors
			if !errors.As(err, &ce) || len(ce.Errs) != 1 || ce.Errs[0].Key != tc.key {
				t.Fatalf("%q: %v, want one error on %s", tc.conf, err, tc.key)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q:\n%s\nwant it to say %q", tc.conf, err, w)
				}
			}
		})
	}
}
