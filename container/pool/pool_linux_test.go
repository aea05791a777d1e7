package pool

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nsbox/nsbox/cgroup"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/clock/clocktest"
	"github.com/nsbox/nsbox/container/internal/testenv"
	"github.com/nsbox/nsbox/container/runner"
)

// fixedRootfs resolves every name to dir and counts the holds.
type fixedRootfs struct {
	dir   string
	holds atomic.Int64
	fail  atomic.Bool
}

func (f *fixedRootfs) acquire(name string) (string, func(), error) {
	if f.fail.Load() {
		return "", nil, errors.New("no such rootfs")
	}
	f.holds.Add(1)
	return f.dir, func() { f.holds.Add(-1) }, nil
}

func newPool(t *testing.T, rfs *fixedRootfs, profiles ...Profile) *Pool {
	t.Helper()
	return newPoolWith(t, Config{Acquire: rfs.acquire, Profiles: profiles})
}

// newPoolWith makes a pool of cfg over a new engine.
func newPoolWith(t *testing.T, cfg Config) *Pool {
	t.Helper()
	cfg.Starter = newEngine(t)
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// waitReady polls until profile i has n runners ready.
func waitReady(t *testing.T, p *Pool, i, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st := p.Stats()[i]
		if st.Ready == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool %s: %d ready, want %d (last error %q)", st.Name, st.Ready, n, st.LastError)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTakeRunsOneCell(t *testing.T) {
	rfs := &fixedRootfs{dir: testenv.Rootfs(t)}
	p := newPool(t, rfs, Profile{Name: "default", Rootfs: "minimal", Size: 2, Preimport: []string{"json", "nsbox_missing"}})
	p.Start(nil)
	waitReady(t, p, 0, 2)

	key := Key{Rootfs: "minimal", RootfsDir: rfs.dir}
	tk := p.Take(key)
	if tk == nil {
		t.Fatal("no runner taken from a full pool")
	}
	if err := tk.Sandbox().Workspace().WriteFile("in.txt", []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := tk.Exec(context.Background(), runner.ExecRequest{Code: "import sys; print(open('in.txt').read(), 'json' in sys.modules)", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != runner.StatusOK || string(res.Stdout) != "hello True\n" || res.Count != 1 {
		t.Fatalf("status %s stdout %q count %d; want ok, %q, 1", res.Status, res.Stdout, res.Count, "hello True\n")
	}
	if _, err := tk.Close(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, p, 0, 2) // refilled
	if n := rfs.holds.Load(); n != 2 {
		t.Errorf("%d rootfs holds, want 2 (the ready runners')", n)
	}

	st := p.Stats()[0]
	if st.Hits != 1 || st.Misses != 0 || st.Refills < 3 || !slices.Equal(st.Skipped, []string{"nsbox_missing"}) {
		t.Errorf("stats %+v: want 1 hit, 0 misses, >= 3 refills, skipped [nsbox_missing]", st)
	}
}

func TestTakeMatching(t *testing.T) {
	rfs := &fixedRootfs{dir: testenv.Rootfs(t)}
	p := newPool(t, rfs, Profile{Name: "small", Rootfs: "minimal", Size: 1, Limits: container.Limits{MemoryBytes: 256 << 20}, Env: []string{"B=2", "A=1"}})
	p.Start(nil)
	waitReady(t, p, 0, 1)
	base := Key{Rootfs: "minimal", RootfsDir: rfs.dir, Limits: container.Limits{MemoryBytes: 256 << 20, Timeout: time.Second, OutputBytes: 1}, Env: []string{"A=1", "B=2"}}
	tests := []struct {
		name  string
		tweak func(*Key)
	}{
		{"other rootfs", func(k *Key) { k.Rootfs = "default" }},
		{"other rootfs dir", func(k *Key) { k.RootfsDir = "/nonexistent" }},
		{"other memory", func(k *Key) { k.Limits.MemoryBytes = 512 << 20 }},
		{"other pids", func(k *Key) { k.Limits.Pids = 7 }},
		{"other cpus", func(k *Key) { k.Limits.CPUs = 0.5 }},
		{"other disk", func(k *Key) { k.Limits.DiskBytes = 2 << 20 }},
		{"less env", func(k *Key) { k.Env = []string{"A=1"} }},
		{"other env", func(k *Key) { k.Env = []string{"A=1", "B=3"} }},
		{"stdin", func(k *Key) { k.Stdin = true }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := base
			k.Env = slices.Clone(base.Env)
			tc.tweak(&k)
			if tk := p.Take(k); tk != nil {
				tk.Close()
				t.Fatalf("key %+v took a runner of profile %+v", k, p.Stats()[0])
			}
		})
	}
	// Timeout and OutputBytes are per run: they don't matter.
	tk := p.Take(base)
	if tk == nil {
		t.Fatal("matching key took nothing")
	}
	tk.Close()
	if tk := p.Take(base); tk != nil { // the refill has not happened yet, or has
		tk.Close()
	}
	if u := p.Unmatched(); u != uint64(len(tests))-1 { // "other rootfs dir" matches the profile and misses
		t.Errorf("unmatched %d, want %d", u, len(tests)-1)
	}
}

func TestDeadRunnerReplaced(t *testing.T) {
	rfs := &fixedRootfs{dir: testenv.Rootfs(t)}
	p := newPool(t, rfs, Profile{Name: "default", Rootfs: "minimal", Size: 1})
	p.Start(nil)
	waitReady(t, p, 0, 1)
	victim := readyRunner(p)
	victim.Sandbox().Kill(container.StatusKilled)
	deadline := time.Now().Add(time.Minute)
	for p.Stats()[0].Discarded == 0 || p.Stats()[0].Ready == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("dead runner not replaced: %+v", p.Stats()[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
	tk := p.Take(Key{Rootfs: "minimal", RootfsDir: rfs.dir})
	if tk == nil || tk.Runner == victim {
		t.Fatal("took the dead runner or none")
	}
	res, err := tk.Exec(context.Background(), runner.ExecRequest{Code: "1+1", Timeout: time.Minute})
	if err != nil || res.Value != "2" {
		t.Fatalf("exec on the replacement: %v %+v", err, res)
	}
	tk.Close()
}

func TestRefillPausesWhileBusy(t *testing.T) {
	rfs := &fixedRootfs{dir: testenv.Rootfs(t)}
	clk := clocktest.New(time.Now())
	p := newPoolWith(t, Config{Acquire: rfs.acquire, Clock: clk, Profiles: []Profile{{Name: "default", Rootfs: "minimal", Size: 1}}})
	var busy atomic.Bool
	busy.Store(true)
	p.Start(busy.Load)
	// The refill found every slot busy and waits to look again; it looks,
	// finds them busy still, and waits again.
	for range 2 {
		if !clk.BlockUntil(1, time.Minute) {
			t.Fatal("the refill never paused for the busy slots")
		}
		if d, _ := clk.Next(); d != busyPoll {
			t.Fatalf("the refill waits %v, want busyPoll (%v)", d, busyPoll)
		}
		if st := p.Stats()[0]; st.Ready != 0 || st.Refills != 0 || st.Failures != 0 || rfs.holds.Load() != 0 {
			t.Fatalf("refilled while busy: %+v, %d rootfs holds", st, rfs.holds.Load())
		}
		clk.Advance(busyPoll)
	}
	busy.Store(false)
	clk.Advance(busyPoll)
	waitReady(t, p, 0, 1)
}

func TestCloseEndsEverything(t *testing.T) {
	rfs := &fixedRootfs{dir: testenv.Rootfs(t)}
	p, err := New(Config{Starter: newEngine(t), Acquire: rfs.acquire, Profiles: []Profile{{Name: "a", Rootfs: "minimal", Size: 2}}, Refills: 2})
	if err != nil {
		t.Fatal(err)
	}
	p.Start(nil)
	waitReady(t, p, 0, 2)
	p.Close()
	if n := rfs.holds.Load(); n != 0 {
		t.Errorf("%d rootfs holds left after Close", n)
	}
	if tk := p.Take(Key{Rootfs: "minimal", RootfsDir: rfs.dir}); tk != nil {
		t.Error("Take after Close returned a runner")
	}
}

func TestRefillFailureBacksOff(t *testing.T) {
	rfs := &fixedRootfs{dir: testenv.Rootfs(t)}
	rfs.fail.Store(true)
	clk := clocktest.New(time.Now())
	p := newPoolWith(t, Config{Acquire: rfs.acquire, Clock: clk, Profiles: []Profile{{Name: "default", Rootfs: "minimal", Size: 1}}})
	p.Start(nil)
	// Each failure doubles the wait before the next try.
	for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond} {
		if !clk.BlockUntil(1, time.Minute) {
			t.Fatalf("failure %d: the refill never waited before trying again (%+v)", i+1, p.Stats()[0])
		}
		if d, _ := clk.Next(); d != want {
			t.Fatalf("failure %d: the refill waits %v, want %v", i+1, d, want)
		}
		if st := p.Stats()[0]; st.Failures != uint64(i+1) || st.LastError == "" {
			t.Fatalf("failure %d: Failures %d (last %q)", i+1, st.Failures, st.LastError)
		}
		clk.Advance(want)
	}
	if !clk.BlockUntil(1, time.Minute) {
		t.Fatal("the refill never waited after its fifth failure")
	}
	rfs.fail.Store(false)
	clk.Advance(time.Hour) // past any back-off
	waitReady(t, p, 0, 1)
	if p.Stats()[0].LastError != "" {
		t.Error("LastError not cleared by a successful refill")
	}
}

func TestNewRejects(t *testing.T) {
	st := runnerStarter{}
	acq := func(string) (string, func(), error) { return "", nil, nil }
	tests := []struct {
		name     string
		profiles []Profile
	}{
		{"no name", []Profile{{Rootfs: "r"}}},
		{"no rootfs", []Profile{{Name: "a"}}},
		{"negative size", []Profile{{Name: "a", Rootfs: "r", Size: -1}}},
		{"twice", []Profile{{Name: "a", Rootfs: "r"}, {Name: "a", Rootfs: "s"}}},
		{"same key", []Profile{{Name: "a", Rootfs: "r"}, {Name: "b", Rootfs: "r", Limits: container.DefaultLimits()}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(Config{Starter: st, Acquire: acq, Profiles: tc.profiles}); !errors.Is(err, ErrInvalidProfile) {
				t.Fatalf("New: %v, want ErrInvalidProfile", err)
			}
		})
	}
}

type runnerStarter struct{}

func (runnerStarter) Start(context.Context, container.Spec) (*container.Sandbox, error) {
	return nil, errors.New("not used")
}

// A pooled sandbox is made in the background, with the least CPU weight,
// and Take gives it a run's weight (TestBackgroundYields in cgroup shows
// what the weight does).
func TestPooledSandboxesYieldTheCPU(t *testing.T) {
	rfs := &fixedRootfs{dir: testenv.Rootfs(t)}
	p := newPool(t, rfs, Profile{Name: "default", Rootfs: "minimal", Size: 1})
	p.Start(nil)
	waitReady(t, p, 0, 1)
	sb := readyRunner(p).Sandbox()
	if got := cpuWeight(t, sb.Pid()); got != "2" && got != "1" {
		t.Errorf("a pooled sandbox's CPU weight is %s, want the least (v1 cpu.shares 2, v2 cpu.weight 1)", got)
	}
	tk := p.Take(Key{Rootfs: "minimal", RootfsDir: rfs.dir})
	if tk == nil {
		t.Fatal("no runner taken from a full pool")
	}
	defer tk.Kill(container.StatusKilled)
	if got := cpuWeight(t, sb.Pid()); got != "1024" && got != "100" {
		t.Errorf("a taken sandbox's CPU weight is %s, want the default (1024 or 100)", got)
	}
}

// cpuWeight reads the CPU weight of pid's cgroup: v1 cpu.shares, else v2
// cpu.weight.
func cpuWeight(t *testing.T, pid int) string {
	t.Helper()
	_, cgs, err := cgroup.ReadProc("/proc", pid)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join("/sys/fs/cgroup/cpu", cgs["cpu"], "cpu.shares")
	if _, v1 := cgs["cpu"]; !v1 {
		file = filepath.Join("/sys/fs/cgroup", cgs[""], "cpu.weight")
	}
	w, err := os.ReadFile(file)
	if err != nil {
		t.Skipf("no cpu controller for sandboxes here: %v", err)
	}
	return strings.TrimSpace(string(w))
}

// readyRunner is the oldest ready runner of p's first profile.
func readyRunner(p *Pool) *runner.Runner {
	pr := p.profiles[0]
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.ready[0].m.(runnerMember).Runner
}
