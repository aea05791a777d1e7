package zygote

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/internal/testenv"
	"github.com/nsbox/nsbox/container/runner"
)

func TestMain(m *testing.M) {
	// Sandboxes re-execute this test binary as their init.
	container.MaybeInit()
	os.Exit(m.Run())
}

// newSet starts a Set of one zygote on dir (named "r") and waits for it.
func newSet(t *testing.T, dir string, modules ...string) (*Set, *container.Engine) {
	t.Helper()
	return newSetOf(t, dir, Profile{Rootfs: "r", Modules: modules, Children: 8, HugePages: true, Bare: true})
}

// newSetOf is newSet with profiles of the test's (on "r").
func newSetOf(t *testing.T, dir string, ps ...Profile) (*Set, *container.Engine) {
	t.Helper()
	return newSetLog(t, dir, nil, ps...)
}

// newSetLog is newSetOf logging to log.
func newSetLog(t *testing.T, dir string, log *slog.Logger, ps ...Profile) (*Set, *container.Engine) {
	t.Helper()
	testenv.RequireRoot(t)
	e, err := container.New(container.Config{RunDir: t.TempDir(), CgroupName: testenv.CgroupName()})
	if err != nil {
		t.Fatalf("container.New: %v", err)
	}
	acquire := func(name string) (string, func(), error) {
		if name != "r" {
			return "", nil, errors.New("no such rootfs")
		}
		return dir, func() {}, nil
	}
	s, err := New(Config{Engine: e, Acquire: acquire, Profiles: ps, Env: runner.ZygoteEnv(), Prelude: runner.ZygotePrelude(), Held: runner.ZygoteHeld(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		if left, err := e.Recover(); err != nil || left > 0 {
			t.Errorf("left behind: %d sandboxes (%v)", left, err)
		}
		e.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return s, e
}

func exec1(t *testing.T, st runner.Starter, dir, code string) *runner.Result {
	t.Helper()
	ctx := context.Background()
	r, err := runner.Start(ctx, st, container.Spec{RootfsDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	res, err := r.Exec(ctx, runner.ExecRequest{Code: code, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A Python runner on the data-science rootfs is a zygote child: it starts
// with the stack imported, and the runner's figure capture works there
// (plt.show() is the runner's, without a warning).
func TestRunnerStartsFromTheZygote(t *testing.T) {
	dir := testenv.DataSciRootfs(t)
	s, _ := newSet(t, dir, DefaultModules()...)
	st := s.Stats()[0]
	if st.State != "ready" || len(st.Skipped) != 0 {
		t.Fatalf("zygote: %+v", st)
	}
	res := exec1(t, s, dir, `
import sys
print(all(m in sys.modules for m in ["pandas", "scipy", "sklearn", "matplotlib.pyplot"]))
import matplotlib.pyplot as plt
plt.plot([1, 2, 3]); plt.show()
`)
	if res.Status != runner.StatusOK || strings.TrimSpace(string(res.Stdout)) != "True" || len(res.Stderr) != 0 {
		t.Fatalf("cell: %s stdout %q stderr %q", res.Status, res.Stdout, res.Stderr)
	}
	if len(res.Figures) != 1 {
		t.Errorf("%d figures, want the one shown", len(res.Figures))
	}
	if got := s.Stats()[0].Forks; got != 1 {
		t.Errorf("forks = %d, want 1", got)
	}
}

// A runner records whether it was forked: from the Set while its zygote is
// ready, and not from the engine.
func TestRunnerForked(t *testing.T) {
	dir := testenv.Rootfs(t)
	s, e := newSet(t, dir, "json")
	for _, tc := range []struct {
		name string
		st   runner.Starter
		want bool
	}{{"zygote set", s, true}, {"engine", e, false}} {
		r, err := runner.Start(context.Background(), tc.st, container.Spec{RootfsDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if r.Forked() != tc.want {
			t.Errorf("%s: Forked() = %v, want %v", tc.name, r.Forked(), tc.want)
		}
		r.Close()
	}
}

// A rootfs's lean zygote takes the runs whose imports it holds as well as
// the main one, and the main one takes the rest: runs of unknown imports,
// of modules only the main one holds, and of modules neither holds that
// are not standard library. Each child really holds its zygote's modules.
func TestLeanZygoteRouting(t *testing.T) {
	dir := testenv.DataSciRootfs(t)
	s, _ := newSetOf(t, dir,
		Profile{Rootfs: "r", Modules: []string{"numpy", "matplotlib"}, Children: 8},
		Profile{Rootfs: "r", Modules: []string{"numpy"}, Children: 8, Lean: true})
	main, lean := s.slots[0].z, s.slots[1].z
	if main == nil || lean == nil {
		t.Fatalf("zygotes not ready: %+v", s.Stats())
	}
	if !lean.Has("numpy") || lean.Has("matplotlib") || !main.Has("matplotlib") || !lean.Stdlib("wave") || lean.Stdlib("numpy") {
		t.Fatal("the zygotes' reported modules are wrong")
	}
	for _, tc := range []struct {
		name    string
		imports []string
		lean    bool
	}{
		{"unknown", nil, false},
		{"nothing", []string{}, true},
		{"numpy", []string{"numpy"}, true},
		{"standard library neither holds", []string{"numpy", "wave"}, true},
		{"matplotlib", []string{"numpy", "matplotlib"}, false},
		{"third-party neither holds", []string{"nsbox_no_such_module"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.Stats()
			r, err := runner.Start(context.Background(), s, container.Spec{RootfsDir: dir, Imports: tc.imports})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			res, err := r.Exec(context.Background(), runner.ExecRequest{Code: "import sys; print('matplotlib' in sys.modules)", Timeout: time.Minute})
			if err != nil || res.Status != runner.StatusOK {
				t.Fatalf("exec: %v %+v", err, res)
			}
			if got, want := strings.TrimSpace(string(res.Stdout)), map[bool]string{true: "False", false: "True"}[tc.lean]; got != want {
				t.Errorf("the child holds matplotlib: %s, want %s", got, want)
			}
			after := s.Stats()
			if after[0].Forks-before[0].Forks != map[bool]uint64{true: 0, false: 1}[tc.lean] ||
				after[1].Forks-before[1].Forks != map[bool]uint64{true: 1, false: 0}[tc.lean] {
				t.Errorf("forks main %d -> %d, lean %d -> %d; want the run on lean=%v", before[0].Forks, after[0].Forks, before[1].Forks, after[1].Forks, tc.lean)
			}
		})
	}
}

// When the zygote dies, runs start cold on the engine, and the zygote is
// back (a new process) within its backoff.
func TestZygoteRestartsAndRunsFallBack(t *testing.T) {
	dir := testenv.Rootfs(t)
	s, _ := newSet(t, dir, "json")
	before := s.Stats()[0]
	if before.State != "ready" {
		t.Fatalf("zygote: %+v", before)
	}
	if !s.kill("r") {
		t.Fatal("no zygote to kill")
	}
	// Until it is back, runs start cold; none fails.
	for range 3 {
		if res := exec1(t, s, dir, "print(1)"); res.Status != runner.StatusOK {
			t.Fatalf("run while the zygote is down: %+v", res)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := s.Stats()[0]
		if st.State == "ready" && st.Pid != before.Pid {
			if st.Restarts != 1 {
				t.Errorf("restarts = %d", st.Restarts)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("zygote not back: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	forks := s.Stats()[0].Forks
	if res := exec1(t, s, dir, "print(1)"); res.Status != runner.StatusOK {
		t.Fatalf("run on the new zygote: %+v", res)
	}
	if s.Stats()[0].Forks != forks+1 {
		t.Error("the run after the restart was not forked by the new zygote")
	}
}

// A rootfs with none of the modules gets a bare zygote (the interpreter and
// the runner, compiled): Python runs are still its children, and report
// every module skipped. Commands that are not python3 -I -c run on the
// engine.
func TestBareZygoteWithoutTheModules(t *testing.T) {
	dir := testenv.Rootfs(t)
	s, _ := newSet(t, dir, "no_such_module_a", "no_such_module_b")
	st := s.Stats()[0]
	if st.State != "ready" || strings.Join(st.Skipped, ",") != "no_such_module_a,no_such_module_b" {
		t.Fatalf("zygote: %+v, want a ready bare zygote with both modules skipped", st)
	}
	res, err := s.Run(context.Background(), container.Spec{RootfsDir: dir, Argv: []string{"sh", "-c", "echo hi"}})
	if err != nil || res.Status != container.StatusOK || strings.TrimSpace(string(res.Stdout)) != "hi" {
		t.Fatalf("shell run: %v %+v", err, res)
	}
	if s.Stats()[0].Forks != st.Forks {
		t.Error("a shell run was forked from the zygote")
	}
	if res := exec1(t, s, dir, "import sys\nprint('no_such_module_a' in sys.modules)"); res.Status != runner.StatusOK || string(res.Stdout) != "False\n" {
		t.Fatalf("python run: %+v", res)
	}
	if got := s.Stats()[0]; got.Forks != st.Forks+1 || got.Fallbacks != 0 {
		t.Errorf("the Python run was not the bare zygote's child: %+v", got)
	}
}

// With bare zygotes off, a rootfs with none of the modules gets no zygote
// (state unused); runs start cold as before.
func TestNoZygoteWhenBareIsOff(t *testing.T) {
	dir := testenv.Rootfs(t)
	s, _ := newSetOf(t, dir, Profile{Rootfs: "r", Modules: []string{"no_such_module_a"}, Children: 8})
	if st := s.Stats()[0]; st.State != "unused" {
		t.Fatalf("zygote: %+v, want unused", st)
	}
	if res := exec1(t, s, dir, "print(1)"); res.Status != runner.StatusOK {
		t.Fatalf("python run: %+v", res)
	}
}

// A cell past its timeout on a zygote child gets its KeyboardInterrupt
// (SIGINT through the child's pidfd) and the session lives on.
func TestZygoteChildInterrupt(t *testing.T) {
	dir := testenv.Rootfs(t)
	s, _ := newSet(t, dir, "json")
	ctx := context.Background()
	r, err := runner.Start(ctx, s, container.Spec{RootfsDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if s.Stats()[0].Forks != 1 {
		t.Fatal("the runner was not forked by the zygote")
	}
	// 2 s: an interrupt that came before the cell started (a busy machine
	// slow to hand it over) would be ignored and the runner killed.
	res, err := r.Exec(ctx, runner.ExecRequest{Code: "while True: pass", Timeout: 2 * time.Second})
	if err != nil || res.Status != runner.StatusTimeout || res.Exception == nil || res.Exception.Name != "KeyboardInterrupt" {
		t.Fatalf("timeout: %v %+v", err, res)
	}
	res, err = r.Exec(ctx, runner.ExecRequest{Code: "6 * 7"})
	if err != nil || res.Status != runner.StatusOK || res.Value != "42" {
		t.Fatalf("after the interrupt: %v %+v", err, res)
	}
}
