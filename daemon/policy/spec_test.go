package policy

import (
	"strings"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
)

// TestCellSpecHasNoArgv: a run whose code goes to a runner gets no
// command from the policy (the runner sets its own); the engine's Spec
// carries the language's one-shot program.
func TestCellSpecHasNoArgv(t *testing.T) {
	pol, err := New(Policy{})
	if err != nil {
		t.Fatal(err)
	}
	j, err := pol.Validate(&agentapi.RunRequest{Language: "python3", Code: "print(1)"})
	if err != nil {
		t.Fatal(err)
	}
	if j.Language != "python" || j.Lang == nil || j.Lang.Runner == "" {
		t.Fatalf("python3 resolved to %q %+v", j.Language, j.Lang)
	}
	if sp := j.CellSpec("id", "/dir"); sp.Argv != nil {
		t.Errorf("CellSpec argv %q, want none", sp.Argv)
	}
	if sp := j.Spec("id", "/dir"); strings.Join(sp.Argv, " ") != "python3 -c print(1)" {
		t.Errorf("Spec argv %q", sp.Argv)
	}
	if _, err := pol.Validate(&agentapi.RunRequest{Language: "bash", Code: "x", AllowedImports: []string{"os"}}); err == nil || !strings.Contains(err.Error(), "allowed_imports") {
		t.Errorf("allowed_imports on bash: %v", err)
	}
}
