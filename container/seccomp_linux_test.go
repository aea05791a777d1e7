package container

import (
	"slices"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/seccomp"
)

// A caller-supplied profile replaces the default: here the default minus
// mkdir/mkdirat, so the same code succeeds by default and fails with it,
// in a cold sandbox and in a zygote's child (whose request names a filter
// only when it is not the zygote's default).
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
	custom := func(s *Spec) { s.Seccomp = prog }
	if out := mustOK(t, runPy(t, e, code, custom)); !strings.HasPrefix(out, "refused 1") {
		t.Fatalf("custom profile without mkdir: %q, want EPERM (1)", out)
	}
	z := newTestZygote(t, e, "")
	for _, round := range []string{"first", "again"} { // and the default after a custom one
		if out := mustOK(t, runOn(t, z, code)); out != "made" {
			t.Fatalf("zygote child, default profile (%s): %q", round, out)
		}
		if out := mustOK(t, runOn(t, z, code, custom)); !strings.HasPrefix(out, "refused 1") {
			t.Fatalf("zygote child, custom profile without mkdir (%s): %q, want EPERM (1)", round, out)
		}
	}
}
