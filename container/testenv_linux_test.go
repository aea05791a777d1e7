package container

import (
	"context"
	"github.com/nsbox/nsbox/daemon/egress"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nsbox/nsbox/cgroup"
	"github.com/nsbox/nsbox/container/internal/testenv"
)

// testSpares, when > 0, makes newTestEngine keep that many spare inits, and
// check that the test's runs were served by them. Tests run sequentially,
// so TestIsolationWithSpareInits can switch it around the suite.
var testSpares int

// testInitBinary, when set, is the standalone init (cmd/nsbox-init) the
// engines of TestIsolationWithStandaloneInit exec instead of this binary.
var testInitBinary string

// testZygote, when true, makes runSpec and startSpec run Python commands
// on a zygote started for the test (TestIsolationWithZygote), and check at
// cleanup that the test's runs were forked by it.
var testZygote bool

// testInit, when true, makes startSpec ask for Spec.Init: pid 1 is the
// reaper and the command its child (TestIsolationWithInit).
var testInit bool

// testListener, when true, makes startSpec give every sandbox what a
// network policy gives it: the daemon's egress listener on 127.0.0.1:3128
// inside its network namespace (it accepts and closes), so the isolation
// suite also runs on networked sandboxes.
var testListener bool

// newTestEngine returns an engine whose cgroups live under a name unique to
// this test process, and checks at cleanup that nothing of it remains.
func newTestEngine(t testing.TB) *Engine {
	t.Helper()
	testenv.RequireRoot(t)
	name := testenv.CgroupName()
	e, err := New(Config{RunDir: t.TempDir(), CgroupName: name, Spares: testSpares, InitBinary: testInitBinary})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if e.spares != nil {
		// Let the first run find a spare ready (cleanup checks that a run
		// took one), however long a busy machine takes to make them.
		for deadline := time.Now().Add(time.Minute); !e.spares.Full() && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	t.Cleanup(func() {
		if e.spares != nil {
			if e.spares.Taken() == 0 && !t.Skipped() {
				t.Error("no run took a spare init")
			}
			e.spares.Close() // spares are the engine's, not leftovers
		}
		if left, err := e.cgroups.Leftovers(); err != nil || len(left) > 0 {
			t.Errorf("cgroups left behind: %v (err %v)", left, err)
		}
		e.Close()
		assertNoCgroupParent(t, name)
	})
	return e
}

// assertNoCgroupParent fails t when a cgroup parent called name exists in
// any hierarchy.
func assertNoCgroupParent(t testing.TB, name string) {
	t.Helper()
	layout, err := cgroup.LocateSelf()
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{"unified": layout.Unified}
	for ctrl, dir := range layout.V1 {
		dirs[ctrl] = dir
	}
	for ctrl, dir := range dirs {
		if dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("cgroup parent %s left in %s", name, ctrl)
		}
	}
}

// runPy runs python3 -c code with optional spec tweaks.
func runPy(t testing.TB, e *Engine, code string, tweak ...func(*Spec)) *Result {
	t.Helper()
	return runSpec(t, e, Spec{Argv: []string{"python3", "-c", code}}, tweak...)
}

func runSpec(t testing.TB, e *Engine, spec Spec, tweak ...func(*Spec)) *Result {
	t.Helper()
	if spec.RootfsDir == "" {
		spec.RootfsDir = testenv.Rootfs(t)
	}
	for _, f := range tweak {
		f(&spec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := startSpec(t, ctx, e, spec)
	var res *Result
	if err == nil {
		res, err = sb.Wait()
	}
	if err != nil {
		t.Fatalf("Run(%q): %v", spec.Argv, err)
	}
	return res
}

func mustOK(t testing.TB, res *Result) string {
	t.Helper()
	if res.Status != StatusOK {
		t.Fatalf("status %s (exit %d, signal %q), stderr:\n%s", res.Status, res.ExitCode, res.Signal, res.Stderr)
	}
	return strings.TrimSpace(string(res.Stdout))
}

// startSpec is e.Start, or with testZygote a zygote's Start for Python
// commands (python3 -c CODE runs as python3 -I -c CODE there).
func startSpec(t testing.TB, ctx context.Context, e *Engine, spec Spec) (*Sandbox, error) {
	t.Helper()
	if testListener && spec.BeforeStart == nil {
		spec.BeforeStart = func(pid int) error {
			l, err := egress.ListenIn(pid, "127.0.0.1:3128")
			if err != nil {
				return err
			}
			t.Cleanup(func() { l.Close() })
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					c.Close()
				}
			}()
			return nil
		}
	}
	spec.Init = spec.Init || testInit
	if testZygote && len(spec.Argv) >= 3 && spec.Argv[0] == "python3" && spec.Argv[1] == "-c" {
		spec.Argv = append([]string{"python3", "-I"}, spec.Argv[1:]...)
		return zygoteFor(t, e, spec.RootfsDir).Start(ctx, spec)
	}
	return e.Start(ctx, spec)
}

// zygoteFor returns the test's zygote on rootfs dir, started on first use;
// at cleanup it checks that the zygote forked something.
func zygoteFor(t testing.TB, e *Engine, dir string) *Zygote {
	t.Helper()
	testZygotesMu.Lock()
	defer testZygotesMu.Unlock()
	if z := testZygotes[e]; z != nil {
		return z
	}
	z := newTestZygote(t, e, dir)
	t.Cleanup(func() {
		if z.Forks() == 0 && !t.Skipped() {
			t.Error("no run was forked by the zygote")
		}
		testZygotesMu.Lock()
		delete(testZygotes, e)
		testZygotesMu.Unlock()
	})
	testZygotes[e] = z
	return z
}

var (
	testZygotesMu sync.Mutex
	testZygotes   = map[*Engine]*Zygote{}
)
