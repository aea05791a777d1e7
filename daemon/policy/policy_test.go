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
		pol.Sessions != (Sessions{Max: 16, IdleTimeout: 15 * time.Minute, MaxLifetime: 24 * time.Hour, IdleAction: IdleEnd, ParkMaxBytes: DefaultParkMaxBytes, ParkRetention: DefaultParkRetention}) || len(pol.names) != len(agentapi.BuiltinProfiles()) {
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

func TestValidImports(t *testing.T) {
	for _, tc := range []struct {
		names []string
		field string // "" when valid
	}{
		{names: nil},
		{names: []string{}},
		{names: []string{"pandas", "os.path", "_private", "mod2", "A.B_c"}},
		{names: []string{"pandas", ""}, field: "allowed_imports[1]"},
		{names: []string{"os/path"}, field: "allowed_imports[0]"},
		{names: []string{".os"}, field: "allowed_imports[0]"},
		{names: []string{"os."}, field: "allowed_imports[0]"},
		{names: []string{"os..path"}, field: "allowed_imports[0]"},
		{names: []string{"2fa"}, field: "allowed_imports[0]"},
		{names: []string{"a-b"}, field: "allowed_imports[0]"},
		{names: []string{strings.Repeat("a", maxModuleName+1)}, field: "allowed_imports[0]"},
		{names: make([]string, maxImports+1), field: "allowed_imports"},
	} {
		err := ValidImports(tc.names)
		var fe *errdefs.FieldError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%q refused: %v", tc.names, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("%.40q: got %v, want an error on %s", tc.names, err, tc.field)
		}
	}
	pol, err := New(Policy{})
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []*agentapi.RunRequest{
		{Argv: []string{"python3"}, AllowedImports: []string{"os"}},
		{Language: agentapi.LanguageBash, Code: "true", AllowedImports: []string{}},
	} {
		if _, err := pol.Validate(req); err == nil || !strings.Contains(err.Error(), "Python code only") {
			t.Errorf("%+v: got %v, want allowed_imports refused outside Python", req, err)
		}
	}
	j, err := pol.Validate(&agentapi.RunRequest{Language: agentapi.LanguagePython, Code: "1", AllowedImports: []string{}})
	if err != nil || j.AllowedImports == nil {
		t.Errorf("an empty list must stay a (restrictive) empty list: %v %+v", err, j)
	}
}
