package network

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestParse: which allowOut and denyOut entries are taken, and as what.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		allow, deny []string
		want        []string // the egress policy's allow; nil: none
		err         string   // a substring of the error; "": none
	}{
		{allow: []string{"pypi.org", "*.pythonhosted.org", "api.test:8443"}, want: []string{"pypi.org", "*.pythonhosted.org", "api.test:8443"}},
		{allow: []string{"10.1.2.3/32", "2001:db8::1/128", "192.0.2.7"}, want: []string{"10.1.2.3", "2001:db8::1", "192.0.2.7"}},
		{deny: []string{"0.0.0.0/0", "8.8.8.8", "bad.example.com"}},
		{allow: []string{"0.0.0.0/0"}, err: "allowOut[0]"},
		{allow: []string{"a.test", "::/0"}, err: "allowOut[1]"},
		{allow: []string{"-a.test"}, err: "allowOut[0]"},
		{allow: []string{"a..test"}, err: "allowOut[0]"},
		{allow: []string{"a!b.test"}, err: "allowOut[0]"},
		{allow: []string{"*"}, err: "allowOut[0]"},
		{deny: []string{""}, err: "denyOut[0]"},
		{deny: []string{"x", "a b"}, err: "denyOut[1]"},
	} {
		c := Config{AllowOut: tc.allow, DenyOut: tc.deny}
		info, egress, err := c.Parse(false)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v %v: err %v, want one naming %s", tc.allow, tc.deny, err, tc.err)
			}
		case err != nil:
			t.Errorf("%v %v: %v", tc.allow, tc.deny, err)
		case tc.want == nil && egress != nil, tc.want != nil && (egress == nil || !slices.Equal(egress.Allow, tc.want)):
			t.Errorf("%v %v: egress %+v, want %v", tc.allow, tc.deny, egress, tc.want)
		case !slices.Equal(info.DenyOut, tc.deny):
			t.Errorf("%v %v: kept denyOut %v", tc.allow, tc.deny, info.DenyOut)
		}
	}
	if _, _, err := (&Config{AllowOut: []string{"a.test"}}).Parse(true); err == nil {
		t.Error("allowOut on a snapshot's copy was taken")
	}
	for _, body := range []string{`{"rules": null, "egressProxy": null}`, `{"rules": {}}`} {
		var c Config
		if err := json.Unmarshal([]byte(body), &c); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Parse(false); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// TestUpdated: denyOut replaced, the public and mask settings kept, and
// any change to what gets out refused.
func TestUpdated(t *testing.T) {
	now := &Info{AllowOut: []string{"b.test", "a.test"}, AllowPublicTraffic: true, MaskRequestHost: "h:${PORT}"}
	next, err := now.Updated(Update{AllowOut: []string{"a.test", "b.test", "a.test"}, DenyOut: []string{"8.8.8.8"}})
	if err != nil || !next.AllowPublicTraffic || next.MaskRequestHost != now.MaskRequestHost || !slices.Equal(next.DenyOut, []string{"8.8.8.8"}) {
		t.Fatalf("%+v, %v", next, err)
	}
	for _, u := range []Update{{}, {AllowOut: []string{"a.test"}}, {AllowOut: []string{"a.test", "b.test", "c.test"}}} {
		if _, err := now.Updated(u); err == nil || !strings.Contains(err.Error(), "lets out b.test, a.test") {
			t.Errorf("%+v: %v, want an error saying what the sandbox lets out", u, err)
		}
	}
	var none *Info
	if next, err := none.Updated(Update{DenyOut: []string{"0.0.0.0/0"}}); err != nil || next.AllowOut != nil {
		t.Errorf("denyOut on a sandbox without egress: %+v, %v", next, err)
	}
	if _, err := none.Updated(Update{AllowOut: []string{"a.test"}}); err == nil || !strings.Contains(err.Error(), "lets out nothing") {
		t.Errorf("allowOut on a sandbox without egress: %v", err)
	}
	if got := now.MaskHost("8000-x.localhost", "8000"); got != "h:8000" {
		t.Errorf("MaskHost: %q", got)
	}
	if got := none.MaskHost("8000-x.localhost", "8000"); got != "8000-x.localhost" {
		t.Errorf("MaskHost without a mask: %q", got)
	}
}
