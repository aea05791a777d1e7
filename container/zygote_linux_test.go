package container

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/internal/testenv"
)

// newTestZygote starts a zygote on the test rootfs (or dir) and closes it
// at cleanup, after checking it never left a child behind.
func newTestZygote(t testing.TB, e *Engine, dir string, modules ...string) *Zygote {
	t.Helper()
	if dir == "" {
		dir = testenv.Rootfs(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	z, err := e.StartZygote(ctx, ZygoteConfig{RootfsDir: dir, Modules: modules, Children: 8})
	if err != nil {
		t.Fatalf("StartZygote: %v", err)
	}
	t.Cleanup(func() {
		if n := z.Live(); n != 0 {
			t.Errorf("%d zygote children still hold a slot", n)
		}
		if err := z.Close(); err != nil {
			t.Errorf("close zygote: %v", err)
		}
	})
	return z
}

func zyPy(code string) []string { return []string{"python3", "-I", "-c", code} }

func TestZygoteRunsPython(t *testing.T) {
	e := newTestEngine(t)
	z := newTestZygote(t, e, "", "json", "no_such_module_xyz")
	if got := z.Skipped(); len(got) != 1 || got[0] != "no_such_module_xyz" {
		t.Errorf("skipped = %v", got)
	}
	res, err := z.Run(context.Background(), Spec{RootfsDir: z.RootfsDir(), Argv: zyPy("import sys, json; print(6*7, 'json' in sys.modules, sys.argv)")})
	if err != nil {
		t.Fatal(err)
	}
	if got := mustOK(t, res); got != "42 True ['-c']" {
		t.Errorf("stdout %q", got)
	}
	res, err = z.Run(context.Background(), Spec{RootfsDir: z.RootfsDir(), Argv: zyPy("import sys; print('x', file=sys.stderr); sys.exit(3)")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusExitNonzero || res.ExitCode != 3 || strings.TrimSpace(string(res.Stderr)) != "x" {
		t.Errorf("exit 3: %+v", res)
	}
}
