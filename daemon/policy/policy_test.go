package policy

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
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

// TestExecSizeLimits: what execve would refuse with E2BIG is a field
// error naming the limit, not a failed spawn.
func TestExecSizeLimits(t *testing.T) {
	pol, err := New(Policy{})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", MaxArgBytes+1)
	for _, tc := range []struct {
		name  string
		req   agentapi.RunRequest
		field string
	}{
		{"bash code", agentapi.RunRequest{Language: "bash", Code: big}, "code"},
		{"argv element", agentapi.RunRequest{Argv: []string{"echo", big}}, "argv[1]"},
		{"env value", agentapi.RunRequest{Argv: []string{"true"}, Env: map[string]string{"K": big}}, "env.K"},
		{"argv in all", agentapi.RunRequest{Argv: slices.Repeat([]string{big[:MaxArgBytes]}, 9)}, "argv"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pol.Validate(&tc.req)
			var fe *errdefs.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Msg, "limit") && !strings.Contains(fe.Msg, "above") {
				t.Errorf("err = %v, want a field error on %s naming the limit", err, tc.field)
			}
		})
	}
	// Python code goes to the runner, not through exec: no such limit.
	if _, err := pol.Validate(&agentapi.RunRequest{Language: "python", Code: strings.Repeat(big, 10)}); err != nil {
		t.Errorf("1.3 MB of Python code: %v", err)
	}
	if _, err := pol.Validate(&agentapi.RunRequest{Language: "bash", Code: big[:MaxArgBytes]}); err != nil {
		t.Errorf("bash code of exactly the limit: %v", err)
	}
}
