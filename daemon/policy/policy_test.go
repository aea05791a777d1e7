package policy

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

func TestPolicy(t *testing.T) {
	if _, err := New(Policy{DefaultLimits: container.Limits{MemoryBytes: 2 << 30}, MaxLimits: container.Limits{MemoryBytes: 1 << 30}}); err == nil {
		t.Error("defaults above the maxima accepted")
	}
	for _, pr := range [][]agentapi.Profile{{{Name: "a"}, {Name: "a"}}, {{Name: "Bad Name"}}, {{Name: "n", Limits: agentapi.Limits{Pids: -1}}}} {
		if _, err := New(Policy{Profiles: pr}); err == nil {
			t.Errorf("profiles %+v accepted", pr)
		}
	}
	pol, err := New(Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if pol.DefaultRootfs != "default" || pol.Defaults != container.DefaultLimits() || pol.Max != DefaultMaxLimits() ||
		pol.Sessions != (Sessions{Max: 16, IdleTimeout: 15 * time.Minute, MaxLifetime: 24 * time.Hour}) || len(pol.names) != len(agentapi.BuiltinProfiles()) {
		t.Errorf("zero policy filled as %+v", pol)
	}
}

func FuzzValidate(f *testing.F) {
	for _, s := range []string{
		`{"argv":["echo","hi"]}`,
		`{"language":"python","code":"print(1)","stdin":"x","env":{"A":"1"},"limits":{"timeout_ms":1000,"cpus":0.5}}`,
		`{"argv":["x"],"files":[{"path":"a/b","content_base64":"AAEC","mode":420},{"path":"t","text":"hi"}],"return_files":["*.png"]}`,
		`{"argv":["x"],"rootfs":"default","limits":{"memory_bytes":-1}}`,
		`{"argv":["x"],"profile":"small","limits":{"cpus":1e308}}`,
	} {
		f.Add([]byte(s))
	}
	pol, err := New(Policy{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req agentapi.RunRequest
		if json.Unmarshal(body, &req) != nil {
			return
		}
		j, err := pol.Validate(&req)
		if err != nil {
			var fe *errdefs.FieldError
			if !errors.As(err, &fe) || !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("validate error %v (%T) is not a FieldError", err, err)
			}
			return
		}
		for _, f := range j.Files {
			if container.ValidPath(f.Path) != nil || f.Mode > 0o777 {
				t.Fatalf("validated job has a bad file %+v", f)
			}
		}
		if len(j.Argv) == 0 && j.Language == "" {
			t.Fatal("validated job has no command")
		}
		l, m := j.Limits, pol.Max
		if l.Timeout <= 0 || l.Timeout > m.Timeout || l.MemoryBytes <= 0 || l.MemoryBytes > m.MemoryBytes || l.Pids > m.Pids ||
			l.CPUs <= 0 || l.CPUs > m.CPUs || l.DiskBytes > m.DiskBytes || l.OutputBytes > m.OutputBytes {
			t.Fatalf("validated limits %+v out of bounds %+v", l, m)
		}
	})
}
