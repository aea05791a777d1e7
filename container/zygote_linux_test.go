package container

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/cgroup"
	"github.com/nsbox/nsbox/container/internal/testenv"
	"github.com/nsbox/nsbox/container/internal/verify"
)

// newTestZygote starts a zygote on the test rootfs (or dir) and closes it
// at cleanup, after checking it never left a child behind.
func newTestZygote(t testing.TB, e *Engine, dir string, modules ...string) *Zygote {
	t.Helper()
	return newTestZygoteConfig(t, e, ZygoteConfig{RootfsDir: dir, Modules: modules})
}

func newTestZygoteConfig(t testing.TB, e *Engine, cfg ZygoteConfig) *Zygote {
	t.Helper()
	if cfg.RootfsDir == "" {
		cfg.RootfsDir = testenv.Rootfs(t)
	}
	if cfg.Children == 0 {
		cfg.Children = 8
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	z, err := e.StartZygote(ctx, cfg)
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
	// Its source and config came on stdin: the command line that ps shows
	// for the zygote and each child stays short.
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", z.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	if len(cmdline) > 512 {
		t.Errorf("the zygote's command line is %d bytes: %.200q...", len(cmdline), cmdline)
	}
}

// An argument that is a held constant of the prelude (the runner's source,
// in the daemon) goes to a child as the constant's name and arrives whole,
// in its place among the others; an argument not held goes as its bytes.
func TestZygoteHeldArguments(t *testing.T) {
	e := newTestEngine(t)
	held := strings.Repeat("held \u00e9 \"quoted\"\n", 2048)
	z := newTestZygoteConfig(t, e, ZygoteConfig{
		Prelude: "UNUSED = 'not used'\nHELD = " + strconv.Quote(held) + "\n",
		Held:    map[string]string{"not used": "UNUSED", held: "HELD"},
	})
	argv := append(zyPy("import sys, hashlib\nfor a in sys.argv[1:]: print(len(a), hashlib.sha256(a.encode()).hexdigest())"),
		"before", held, "after")
	res, err := z.Run(context.Background(), Spec{RootfsDir: z.RootfsDir(), Argv: argv})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, a := range argv[4:] {
		want = append(want, fmt.Sprintf("%d %x", len([]rune(a)), sha256.Sum256([]byte(a))))
	}
	if got := mustOK(t, res); got != strings.Join(want, "\n") {
		t.Errorf("the child's arguments:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

// On v1 a zygote's child places itself in its cgroup (cgroup.TaskFiles),
// in every hierarchy, before it says hello: the engine migrates no process,
// so the kernel's global migration lock (an RCU grace period after an
// idle spell, with cgroup_mutex held) is off the request's path. On v2 the
// engine moves it.
func TestZygoteChildPlacesItself(t *testing.T) {
	e := newTestEngine(t)
	z := newTestZygote(t, e, "")
	r, w := io.Pipe()
	sb, err := z.Start(context.Background(), Spec{RootfsDir: z.RootfsDir(), Argv: zyPy("import sys; sys.stdin.read()"), Stdin: r})
	if err != nil {
		t.Fatal(err)
	}
	c := sb.proc.(*zygoteChild)
	if v2 := e.cgroups.Mode() == cgroup.ModeV2; c.selfPlaced == v2 {
		t.Errorf("cgroups %s: the child placed itself: %v", e.cgroups.Mode(), c.selfPlaced)
	}
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", sb.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(cg), "/"+sb.ID()+"\n"); n != c.cg.Hierarchies() {
		t.Errorf("in its cgroup in %d hierarchies, want %d:\n%s", n, c.cg.Hierarchies(), cg)
	}
	w.Close()
	res, err := sb.Wait()
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
}

// Two live children of one zygote share nothing: every namespace, the host
// uid and the cgroup differ, from each other and from the zygote. Inside,
// neither sees the other or the zygote: signals give ESRCH, ptrace and a
// new user namespace are refused.
func TestZygoteChildrenAreIsolated(t *testing.T) {
	e := newTestEngine(t)
	z := newTestZygote(t, e, "")
	code := fmt.Sprintf(`
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def err(r):
    return "ok" if r != -1 else errno.errorcode[ctypes.get_errno()]
zygote, other = %d, int(sys.stdin.readline())
def kill(pid):
    try:
        os.kill(pid, 0); return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
print("pids", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
print("kill_zygote", kill(zygote), "kill_zygote_ns_pid", kill(2), "kill_other", kill(other))
print("ptrace_zygote", err(libc.ptrace(16, zygote, 0, 0)))
print("unshare_user", err(libc.unshare(0x10000000)))
print("setns", err(libc.setns(0, 0)))
`, z.Pid())
	start := func() (*Sandbox, *io.PipeWriter) {
		r, w := io.Pipe()
		sb, err := z.Start(context.Background(), Spec{RootfsDir: z.RootfsDir(), Argv: zyPy(code), Stdin: r})
		if err != nil {
			t.Fatal(err)
		}
		return sb, w
	}
	a, aIn := start()
	b, bIn := start()
	// Both alive: compare them from the host.
	nsA, err := verify.Namespaces(fmt.Sprint(a.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	nsB, err := verify.Namespaces(fmt.Sprint(b.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range verify.NamespaceKinds {
		if nsA[k] == nsB[k] || nsA[k] == z.ns[k] || nsB[k] == z.ns[k] {
			t.Errorf("%s namespace shared: a %s b %s zygote %s", k, nsA[k], nsB[k], z.ns[k])
		}
	}
	stA, _ := verify.Status(a.Pid())
	stB, _ := verify.Status(b.Pid())
	stZ, _ := verify.Status(z.Pid())
	if stA["Uid"] == stB["Uid"] || stA["Uid"] == stZ["Uid"] || stB["Uid"] == stZ["Uid"] {
		t.Errorf("host uids not distinct: a %q b %q zygote %q", stA["Uid"], stB["Uid"], stZ["Uid"])
	}
	cgA, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", a.Pid()))
	cgB, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", b.Pid()))
	if !strings.Contains(string(cgA), "/"+a.ID()+"\n") || !strings.Contains(string(cgB), "/"+b.ID()+"\n") || string(cgA) == string(cgB) {
		t.Errorf("cgroups:\na %s\nb %s", cgA, cgB)
	}
	fmt.Fprintf(aIn, "%d\n", b.Pid())
	fmt.Fprintf(bIn, "%d\n", a.Pid())
	for _, sb := range []*Sandbox{a, b} {
		res, err := sb.Wait()
		if err != nil {
			t.Fatal(err)
		}
		out := mustOK(t, res)
		for _, want := range []string{"pids [1]", "kill_zygote ESRCH kill_zygote_ns_pid ESRCH kill_other ESRCH",
			"ptrace_zygote EPERM", "unshare_user EPERM", "setns EPERM"} {
			if !strings.Contains(out, want) {
				t.Errorf("missing %q in:\n%s", want, out)
			}
		}
	}
}

// The engine verifies every child from the host before it runs anything:
// a child that skipped its seccomp filter is refused, killed and removed,
// and the code it was given never runs.
func TestZygoteVerificationRefusesAChildWithoutSeccomp(t *testing.T) {
	e := newTestEngine(t)
	z := newTestZygote(t, e, "")
	z.testSkip = "seccomp"
	marker := "zygote-unverified-" + NewID()
	_, err := z.Run(context.Background(), Spec{RootfsDir: z.RootfsDir(), Argv: zyPy("import time; time.sleep(30) # " + marker)})
	if err == nil || !strings.Contains(err.Error(), "verification failed") || !strings.Contains(err.Error(), "Seccomp") {
		t.Fatalf("err = %v, want a verification failure naming Seccomp", err)
	}
	assertNoProcess(t, marker)
	z.testSkip = ""
	if got := mustOK(t, runOn(t, z, "print('fine')")); got != "fine" {
		t.Errorf("next run: %q", got)
	}
}

func runOn(t testing.TB, z *Zygote, code string, tweak ...func(*Spec)) *Result {
	t.Helper()
	spec := Spec{RootfsDir: z.RootfsDir(), Argv: zyPy(code)}
	for _, f := range tweak {
		f(&spec)
	}
	res, err := z.Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Copy-on-write memory is charged to whoever writes it: a child that only
// reads the zygote's 64 MiB stays small in its own cgroup; one that writes
// every page of it is charged for all of it.
func TestZygoteCopyOnWriteAccounting(t *testing.T) {
	e := newTestEngine(t)
	z := newTestZygoteConfig(t, e, ZygoteConfig{Prelude: "BIG = bytearray(b'\\x01') * (64 << 20)"})
	lim := func(s *Spec) { s.Limits.MemoryBytes = 256 << 20 }
	read := runOn(t, z, "import sys; big = sys.modules['_nsbox_prelude'].BIG; print(big.count(b'\\x01'))", lim)
	if got := mustOK(t, read); got != fmt.Sprint(64<<20) {
		t.Fatalf("read: %q", got)
	}
	write := runOn(t, z, "import sys; big = sys.modules['_nsbox_prelude'].BIG; big[::4096] = b'\\x02' * len(range(0, len(big), 4096)); print(big.count(b'\\x02'))", lim)
	if got := mustOK(t, write); got != fmt.Sprint(64<<20/4096) {
		t.Fatalf("write: %q", got)
	}
	t.Logf("peak memory: reader %.1f MiB, writer %.1f MiB", float64(read.MemoryPeakBytes)/(1<<20), float64(write.MemoryPeakBytes)/(1<<20))
	if read.MemoryPeakBytes <= 0 || read.MemoryPeakBytes > 16<<20 {
		t.Errorf("a reading child was charged %d bytes; want under 16 MiB", read.MemoryPeakBytes)
	}
	if write.MemoryPeakBytes < 64<<20 {
		t.Errorf("a writing child was charged %d bytes; want at least 64 MiB", write.MemoryPeakBytes)
	}
	// A writer past its limit is killed by it, like any run.
	oom := runOn(t, z, "import sys; big = sys.modules['_nsbox_prelude'].BIG; big[::4096] = b'\\x02' * len(range(0, len(big), 4096))", func(s *Spec) { s.Limits.MemoryBytes = 32 << 20 })
	if oom.Status != StatusOOM {
		t.Errorf("writing 64 MiB under a 32 MiB limit: status %s", oom.Status)
	}
}

// Children do not share random state: Python's and numpy's generators are
// reseeded in each.
func TestZygoteChildrenGetFreshRandomState(t *testing.T) {
	e := newTestEngine(t)
	z := newTestZygote(t, e, testenv.DataSciRootfs(t), "numpy", "random")
	code := "import random, numpy; print(random.random(), numpy.random.rand())"
	a := mustOK(t, runOn(t, z, code))
	b := mustOK(t, runOn(t, z, code))
	fa, fb := strings.Fields(a), strings.Fields(b)
	if len(fa) != 2 || len(fb) != 2 || fa[0] == fb[0] || fa[1] == fb[1] {
		t.Errorf("two children drew %q and %q", a, b)
	}
}

// Specs the zygote cannot run are refused with ErrZygoteUnsuitable, and a
// closed zygote refuses with ErrZygoteDead; nothing is left behind.
func TestZygoteRefuses(t *testing.T) {
	e := newTestEngine(t)
	z := newTestZygote(t, e, "")
	for _, spec := range []Spec{
		{RootfsDir: z.RootfsDir(), Argv: []string{"sh", "-c", "true"}},
		{RootfsDir: z.RootfsDir(), Argv: []string{"python3", "-c", "print(1)"}},
		{RootfsDir: t.TempDir(), Argv: zyPy("print(1)")},
	} {
		if _, err := z.Run(context.Background(), spec); !errors.Is(err, ErrZygoteUnsuitable) && !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("%v: err = %v", spec.Argv, err)
		}
	}
	z2 := newTestZygote(t, e, "")
	z2.Close()
	if _, err := z2.Run(context.Background(), Spec{RootfsDir: z2.RootfsDir(), Argv: zyPy("print(1)")}); !errors.Is(err, ErrZygoteDead) {
		t.Errorf("closed zygote: err = %v", err)
	}
}

// When the zygote dies, its live children die with it, and their
// sandboxes report it.
func TestZygoteDeathKillsItsChildren(t *testing.T) {
	e := newTestEngine(t)
	z := newTestZygote(t, e, "")
	sb, err := z.Start(context.Background(), Spec{RootfsDir: z.RootfsDir(), Argv: zyPy("import time; time.sleep(60)")})
	if err != nil {
		t.Fatal(err)
	}
	z.sb.Kill(StatusKilled)
	select {
	case <-z.Done():
	case <-time.After(time.Minute):
		t.Fatal("zygote not reported dead")
	}
	res, err := sb.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusKilled {
		t.Errorf("child of a dead zygote: status %s", res.Status)
	}
}

// A run's code and environment go to its child, never through the zygote:
// after a run, neither is anywhere in the zygote's memory (where every
// later child could read it).
func TestZygoteNeverHoldsARunsData(t *testing.T) {
	e := newTestEngine(t)
	z := newTestZygote(t, e, "")
	secret, code := "env-secret-"+NewID(), "code-secret-"+NewID()
	res := runOn(t, z, "import os; print(os.environ['TOKEN'] == '"+secret+"') # "+code, func(s *Spec) { s.Env = []string{"TOKEN=" + secret} })
	if got := mustOK(t, res); got != "True" {
		t.Fatalf("child: %q", got)
	}
	// The spare forked after the run, the next run's child, holds none
	// of it either.
	for _, pid := range []int{z.Pid(), zygoteSpare(t, z)} {
		if scanned := scanForSecrets(t, pid, secret, code); scanned < 1<<20 {
			t.Fatalf("scanned only %d bytes of the memory of %d", scanned, pid)
		}
	}
}

// scanForSecrets reports the secrets found in pid's writable memory and
// returns how many bytes it read.
func scanForSecrets(t *testing.T, pid int, secrets ...string) int {
	t.Helper()
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	scanned := 0
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[1], "rw") {
			continue
		}
		var lo, hi uint64
		if _, err := fmt.Sscanf(f[0], "%x-%x", &lo, &hi); err != nil {
			continue
		}
		buf := make([]byte, hi-lo)
		n, _ := mem.ReadAt(buf, int64(lo))
		scanned += n
		for _, s := range secrets {
			if strings.Contains(string(buf[:n]), s) {
				t.Errorf("the memory of %d (%s) holds %q", pid, f[0], s)
			}
		}
	}
	return scanned
}

// zygoteSpare waits for the zygote's spare: its one child while no run
// is live (zygote.py forks it ahead of the next request).
func zygoteSpare(t *testing.T, z *Zygote) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", z.Pid(), z.Pid()))
		if err != nil {
			t.Fatal(err)
		}
		if f := strings.Fields(string(b)); len(f) == 1 {
			pid, err := strconv.Atoi(f[0])
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("the zygote's children are %q, want one spare", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A spare is a child forked before any request: in namespaces of its own
// and outside every run's cgroup, with nothing of a run. One that dies
// before it is taken (reaped by then or not) costs the next run nothing:
// the zygote forks another.
func TestZygoteSpare(t *testing.T) {
	e := newTestEngine(t)
	z := newTestZygote(t, e, "")
	mustOK(t, runOn(t, z, "print(1)"))
	spare := zygoteSpare(t, z)
	ns, err := verify.Namespaces(strconv.Itoa(spare))
	if err != nil {
		t.Fatal(err)
	}
	for kind, id := range ns {
		if kind != "cgroup" && (id == z.ns[kind] || id == z.hostNS[kind]) {
			t.Errorf("the spare's %s namespace is the zygote's or the engine's (%s)", kind, id)
		}
	}
	for i, pause := range []time.Duration{0, 0, 100 * time.Millisecond, 0, 100 * time.Millisecond} {
		spare := zygoteSpare(t, z)
		if err := unix.Kill(spare, unix.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// Dead, reaped or not yet: a spare that dies while it is being
		// taken fails that run's set-up like any child's death would.
		for {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", spare))
			if err != nil || strings.Contains(string(b), ") Z ") {
				break
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(pause)
		if got := mustOK(t, runOn(t, z, fmt.Sprintf("print(%d)", i))); got != strconv.Itoa(i) {
			t.Errorf("run %d after its spare was killed: %q", i, got)
		}
	}
}
