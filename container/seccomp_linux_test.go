package container

import (
	"slices"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/seccomp"
)

// A caller-supplied profile replaces the default: here the default minus
// mkdir/mkdirat, so the same code succeeds by default and fails with it.
func TestCustomSeccompProfile(t *testing.T) {
	e := newTestEngine(t)
	prof, err := seccomp.Default()
	if err != nil {
		t.Fatal(err)
	}
	for i := range prof.Syscalls {
		prof.Syscalls[i].Names = slices.DeleteFunc(prof.Syscalls[i].Names, func(n string) bool {
			return n == "mkdir" || n == "mkdirat"
		})
	}
	prog, err := prof.Compile()
	if err != nil {
		t.Fatal(err)
	}
	code := "import os\ntry:\n    os.mkdir('d'); print('made')\nexcept OSError as e:\n    print('refused', e.errno)"
	if out := mustOK(t, runPy(t, e, code)); out != "made" {
		t.Fatalf("default profile: %q", out)
	}
	out := mustOK(t, runPy(t, e, code, func(s *Spec) { s.Seccomp = prog }))
	if !strings.HasPrefix(out, "refused 1") {
		t.Fatalf("custom profile without mkdir: %q, want EPERM (1)", out)
	}
}
