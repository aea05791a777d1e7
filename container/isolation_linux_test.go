package container

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/internal/testenv"
)

func TestRunPrint(t *testing.T) {
	e := newTestEngine(t)
	res := runPy(t, e, "print(6*7)")
	if got := mustOK(t, res); got != "42" {
		t.Fatalf("stdout = %q, want 42", got)
	}
	if res.WallTime <= 0 || res.ID == "" {
		t.Errorf("result lacks wall time or id: %+v", res)
	}
}

func TestExitCodeAndNotFound(t *testing.T) {
	e := newTestEngine(t)
	res := runPy(t, e, "import sys; sys.exit(3)")
	if res.Status != StatusExitNonzero || res.ExitCode != 3 {
		t.Errorf("exit 3: got status %s code %d", res.Status, res.ExitCode)
	}
	res = runSpec(t, e, Spec{Argv: []string{"no-such-command-xyz"}})
	if res.ExitCode != 127 || !strings.Contains(string(res.Stderr), "command not found") {
		t.Errorf("missing command: status %s code %d stderr %q", res.Status, res.ExitCode, res.Stderr)
	}
}

func TestRootfsIsReadOnly(t *testing.T) {
	e := newTestEngine(t)
	code := `
import errno
for p in ["/usr/bin/python3", "/etc/passwd", "/newfile", "/usr/lib/x"]:
    try:
        open(p, "a").close()
        print(p, "WRITABLE")
    except OSError as e:
        print(p, errno.errorcode[e.errno])
`
	out := mustOK(t, runPy(t, e, code))
	if strings.Contains(out, "WRITABLE") {
		t.Fatalf("rootfs writable from the sandbox:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasSuffix(line, "EROFS") && !strings.HasSuffix(line, "EACCES") {
			t.Errorf("unexpected outcome %q", line)
		}
	}
}

func TestCredentialsAndCapabilities(t *testing.T) {
	e := newTestEngine(t)
	code := `
import os
print(os.getuid(), os.geteuid(), os.getgid(), os.getgroups())
st = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
for k in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"]:
    print(k, st[k].strip())
print("sid", os.getsid(0) == os.getpid())
print("tty", os.path.exists("/dev/tty"), os.isatty(0))
`
	out := mustOK(t, runPy(t, e, code))
	want := []string{
		"1000 1000 1000 []",
		"CapInh 0000000000000000", "CapPrm 0000000000000000", "CapEff 0000000000000000",
		"CapBnd 0000000000000000", "CapAmb 0000000000000000",
		"NoNewPrivs 1", "Seccomp 2", "sid True", "tty False False",
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("missing %q in:\n%s", w, out)
		}
	}
}

func TestDangerousSyscallsRefused(t *testing.T) {
	e := newTestEngine(t)
	// x86_64 syscall numbers; each must fail with the errno given, which
	// only the seccomp filter produces for an unprivileged process.
	code := `
import ctypes, errno, platform
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *a):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(x) for x in a])
    return "ok" if r != -1 else errno.errorcode[ctypes.get_errno()]
print("arch", platform.machine())
print("mount", sc(165, 0, 0, 0, 0, 0))
print("umount2", sc(166, 0, 0))
print("unshare_user", sc(272, 0x10000000))
print("unshare_net", sc(272, 0x40000000))
print("setns", sc(308, 0, 0))
print("ptrace", sc(101, 0, 0, 0, 0))
print("bpf", sc(321, 0, 0, 0))
print("keyctl", sc(250, 0, 0, 0, 0, 0))
print("add_key", sc(248, 0, 0, 0, 0, 0))
print("io_uring_setup", sc(425, 1, 0))
print("userfaultfd", sc(323, 0))
print("perf_event_open", sc(298, 0, 0, 0, 0, 0))
print("clone3", sc(435, 0, 0))
print("clone_newns", sc(56, 0x00020000 | 17, 0, 0, 0, 0))
print("chroot", sc(161, 0))
print("pivot_root", sc(155, 0, 0))
`
	out := mustOK(t, runPy(t, e, code))
	if !strings.Contains(out, "arch x86_64") {
		t.Skipf("syscall numbers are x86_64 only; got:\n%s", out)
	}
	got := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(l, " ")
		got[k] = v
	}
	for _, name := range []string{"mount", "umount2", "unshare_user", "unshare_net", "setns", "ptrace", "bpf",
		"keyctl", "add_key", "io_uring_setup", "userfaultfd", "perf_event_open", "clone_newns", "chroot", "pivot_root"} {
		if got[name] != "EPERM" {
			t.Errorf("%s: got %q, want EPERM", name, got[name])
		}
	}
	if got["clone3"] != "ENOSYS" {
		t.Errorf("clone3: got %q, want ENOSYS (so libc falls back to clone)", got["clone3"])
	}
}

func TestNetworkIsLoopbackOnly(t *testing.T) {
	e := newTestEngine(t)
	code := `
import socket
ifs = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]
print("ifs", ",".join(sorted(ifs)))
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
c = socket.create_connection(srv.getsockname()); a, _ = srv.accept()
c.sendall(b"ping"); print("lo", a.recv(4).decode())
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2); print("outside reachable")
except OSError as e:
    print("outside", type(e).__name__)
`
	out := mustOK(t, runPy(t, e, code))
	for _, w := range []string{"ifs lo\n", "lo ping", "outside OSError"} {
		if !strings.Contains(out+"\n", w) {
			t.Errorf("missing %q in:\n%s", w, out)
		}
	}
}

func TestHostIsInvisible(t *testing.T) {
	e := newTestEngine(t)
	secret := filepath.Join(t.TempDir(), "host-secret-"+NewID())
	if err := os.WriteFile(secret, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	code := fmt.Sprintf(`
import os
print("others", sorted({int(p) for p in os.listdir("/proc") if p.isdigit()} - {1, os.getpid()}))
for p in [%q, "/proc/1/root%s", "/proc/%d/root/etc/hostname"]:
    try:
        open(p).read(); print("READ", p)
    except OSError as e:
        print("denied", type(e).__name__)
print("hostname", open("/proc/sys/kernel/hostname").read().strip())
`, secret, secret, os.Getpid())
	out := mustOK(t, runPy(t, e, code))
	if strings.Contains(out, "READ") {
		t.Fatalf("host file reachable from the sandbox:\n%s", out)
	}
	// Its own: the command, pid 1 (or pid 1's child, with Spec.Init).
	if !strings.Contains(out, "others []") {
		t.Errorf("sandbox sees processes other than its own:\n%s", out)
	}
	if !strings.Contains(out, "hostname sandbox") {
		t.Errorf("hostname not isolated:\n%s", out)
	}
}

func TestProcMasked(t *testing.T) {
	e := newTestEngine(t)
	// Compare with the host so the test holds on kernels without some files.
	var masked []string
	for _, p := range []string{"/proc/keys", "/proc/timer_list", "/proc/interrupts", "/proc/kcore", "/proc/sched_debug"} {
		if _, err := os.Stat(p); err == nil {
			masked = append(masked, p)
		}
	}
	if len(masked) == 0 {
		t.Skip("none of the masked /proc files exist on this kernel")
	}
	code := fmt.Sprintf(`
import os
for p in %q.split():
    print("masked", p, len(open(p, "rb").read()))
print("acpi", os.listdir("/proc/acpi") if os.path.exists("/proc/acpi") else [])
try:
    open("/proc/sys/kernel/hostname", "w").write("x"); print("procsys WRITABLE")
except OSError as e:
    print("procsys", type(e).__name__)
print("sys", os.listdir("/sys"))
`, strings.Join(masked, " "))
	out := mustOK(t, runPy(t, e, code))
	for _, p := range masked {
		if !strings.Contains(out, "masked "+p+" 0") {
			t.Errorf("%s readable in the sandbox:\n%s", p, out)
		}
	}
	for _, w := range []string{"acpi []", "procsys OSError", "sys []"} {
		if !strings.Contains(out, w) {
			t.Errorf("missing %q in:\n%s", w, out)
		}
	}
}

func TestMemoryLimitOOM(t *testing.T) {
	e := newTestEngine(t)
	code := "chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))"
	res := runPy(t, e, code, func(s *Spec) { s.Limits.MemoryBytes = 64 << 20 })
	if res.Status != StatusOOM {
		t.Fatalf("memory bomb: status %s (exit %d), want oom; stderr %s", res.Status, res.ExitCode, res.Stderr)
	}
	if res.MemoryPeakBytes < 32<<20 || res.MemoryPeakBytes > 80<<20 {
		t.Errorf("peak memory %d, want near the 64 MiB limit", res.MemoryPeakBytes)
	}
}

func TestForkBombContained(t *testing.T) {
	e := newTestEngine(t)
	code := `
import os, time
n = 0
try:
    while n < 1000:
        if os.fork() == 0:
            time.sleep(30); os._exit(0)
        n += 1
except OSError as e:
    print("stopped", n, type(e).__name__)
`
	res := runPy(t, e, code, func(s *Spec) { s.Limits.Pids = 16 })
	out := mustOK(t, res)
	var n int
	var errName string
	if _, err := fmt.Sscanf(out, "stopped %d %s", &n, &errName); err != nil {
		t.Fatalf("fork bomb was not stopped: %q", out)
	}
	if n >= 16 {
		t.Errorf("forked %d children under a pids limit of 16", n)
	}
	// The limit counts the command and its children, never the init: its
	// reaper is one task more, so the command forks exactly as many.
	if testInit && n != 15 {
		t.Errorf("forked %d children under a pids limit of 16 with an init, want 15 as without", n)
	}
}

func TestTimeoutKillsWholeTree(t *testing.T) {
	e := newTestEngine(t)
	marker := "nsbox-timeout-marker-" + NewID()
	res := runSpec(t, e, Spec{
		Argv:   []string{"/bin/sh", "-c", "python3 -c 'while True: pass' " + marker + " & while :; do :; done"},
		Limits: Limits{Timeout: time.Second},
	})
	if res.Status != StatusTimeout {
		t.Fatalf("status %s, want timeout", res.Status)
	}
	// A generous bound: the kill must follow the deadline, not a later reaper.
	if res.WallTime > 10*time.Second {
		t.Errorf("timeout of 1s took %v to end the run", res.WallTime)
	}
	assertNoProcess(t, marker)
}

func TestBackgroundProcessDiesWithRun(t *testing.T) {
	e := newTestEngine(t)
	marker := "nsbox-bg-marker-" + NewID()
	res := runSpec(t, e, Spec{Argv: []string{"/bin/sh", "-c", "(exec -a " + marker + " sleep 1000) & echo started"}})
	if mustOK(t, res) != "started" {
		t.Fatalf("stdout %q", res.Stdout)
	}
	assertNoProcess(t, marker)
}

// assertNoProcess fails when any process on the host has marker in its argv.
func assertNoProcess(t *testing.T, marker string) {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), marker) {
			t.Errorf("process %s (%q) outlived its sandbox", d.Name(), strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
}

func TestOutputFloodStopsAtCap(t *testing.T) {
	e := newTestEngine(t)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res := runPy(t, e, "import sys\nb = b'x' * (1 << 20)\nfor _ in range(1024): sys.stdout.buffer.write(b)",
		func(s *Spec) { s.Limits.OutputBytes = 1 << 20 })
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if res.Status != StatusOutputLimit || !res.StdoutTruncated {
		t.Fatalf("status %s truncated %v, want output_limit", res.Status, res.StdoutTruncated)
	}
	if len(res.Stdout) != 1<<20 {
		t.Errorf("kept %d bytes, want exactly the 1 MiB cap", len(res.Stdout))
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 64<<20 {
		t.Errorf("engine heap grew by %d MiB for a 1 GiB flood", grew>>20)
	}
}

func TestWorkspaceAndTmpCaps(t *testing.T) {
	e := newTestEngine(t)
	code := `
import os
for d in ["/workspace", "/tmp", "/dev/shm"]:
    try:
        with open(d + "/big", "wb") as f:
            for _ in range(64): f.write(b"x" * (1 << 20))
        print(d, "WROTE 64MiB")
    except OSError as e:
        print(d, type(e).__name__, e.errno)
    try: os.unlink(d + "/big")
    except OSError: pass
print("cwd", os.getcwd(), os.environ["HOME"])
`
	out := mustOK(t, runPy(t, e, code, func(s *Spec) { s.Limits.DiskBytes = 8 << 20 }))
	if strings.Contains(out, "WROTE") {
		t.Fatalf("a capped filesystem took 64 MiB with an 8 MiB cap:\n%s", out)
	}
	if !strings.Contains(out, "cwd /workspace /workspace") {
		t.Errorf("cwd/HOME not the workspace:\n%s", out)
	}
}

func TestCleanEnvironment(t *testing.T) {
	e := newTestEngine(t)
	t.Setenv("NSBOX_HOST_SECRET", "leak")
	res := runPy(t, e, "import os; print(sorted(os.environ.items()))",
		func(s *Spec) { s.Env = []string{"GREETING=hi", "LANG=C"} })
	out := mustOK(t, res)
	if strings.Contains(out, "NSBOX_HOST_SECRET") || strings.Contains(out, "_NSBOX_INIT") {
		t.Errorf("host environment leaked:\n%s", out)
	}
	for _, w := range []string{"('GREETING', 'hi')", "('LANG', 'C')", "('MPLBACKEND', 'Agg')", "('OPENBLAS_NUM_THREADS', '1')"} {
		if !strings.Contains(out, w) {
			t.Errorf("missing %s in %s", w, out)
		}
	}
	if _, err := e.Run(context.Background(), Spec{RootfsDir: testenv.Rootfs(t), Argv: []string{"true"}, Env: []string{"BAD KEY=1"}}); err == nil {
		t.Error("invalid env key accepted")
	}
}

func TestStdinAndFiles(t *testing.T) {
	e := newTestEngine(t)
	code := `
import os, sys
data = sys.stdin.read()
open("out/result.txt", "w").write(data.upper() + open("in/data.txt").read())
os.symlink("/etc/passwd", "link")
print(open("in/data.txt").read())
`
	res := runPy(t, e, code, func(s *Spec) {
		s.Stdin = strings.NewReader("hello ")
		s.Files = []File{{Path: "in/data.txt", Data: []byte("input")}, {Path: "out/.keep", Data: nil}}
		s.ReturnFiles = []string{"out/*"}
	})
	if got := mustOK(t, res); got != "input" {
		t.Fatalf("stdout %q", got)
	}
	var found bool
	for _, f := range res.Files {
		switch f.Path {
		case "out/result.txt":
			found = true
			if string(f.Content) != "HELLO input" || f.Size != 11 || len(f.SHA256) != 64 {
				t.Errorf("result file: %+v", f)
			}
		case "in/data.txt", "out/.keep":
			t.Errorf("unchanged input %s reported as changed", f.Path)
		case "link":
			t.Errorf("symlink reported (and maybe followed): %+v", f)
		}
	}
	if !found {
		t.Errorf("out/result.txt not in files: %+v", res.Files)
	}
}

func TestInvalidSpecs(t *testing.T) {
	e := newTestEngine(t)
	root := testenv.Rootfs(t)
	for _, tc := range []struct {
		name string
		spec Spec
	}{
		{"no argv", Spec{RootfsDir: root}},
		{"no rootfs", Spec{Argv: []string{"true"}}},
		{"not a rootfs", Spec{RootfsDir: t.TempDir(), Argv: []string{"true"}}},
		{"dotdot file", Spec{RootfsDir: root, Argv: []string{"true"}, Files: []File{{Path: "../x"}}}},
		{"absolute file", Spec{RootfsDir: root, Argv: []string{"true"}, Files: []File{{Path: "/etc/x"}}}},
		{"negative memory", Spec{RootfsDir: root, Argv: []string{"true"}, Limits: Limits{MemoryBytes: -1}}},
		{"bad id", Spec{ID: "../x", RootfsDir: root, Argv: []string{"true"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := e.Run(context.Background(), tc.spec); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestConcurrentSandboxesGetDistinctHostIDs(t *testing.T) {
	e := newTestEngine(t)
	const n = 4
	outs := make([]string, n)
	printed := make(chan struct{}, n)
	var wg sync.WaitGroup
	var stdins []*os.File
	for i := range n {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		stdins = append(stdins, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.Close()
			// Alive, once it printed, until its stdin ends: the test ends
			// them all once all four have printed.
			res := runPy(t, e, "import sys; print(open('/proc/self/uid_map').read().split()[-2], flush=True); sys.stdin.read()", func(s *Spec) {
				s.Stdin, s.Stdout = r, &firstWrite{c: printed}
			})
			outs[i] = mustOK(t, res)
		}()
	}
	closeAll := func() {
		for _, w := range stdins {
			w.Close()
		}
	}
	t.Cleanup(closeAll)
	for range n {
		select {
		case <-printed:
		case <-time.After(2 * time.Minute):
			t.Fatal("the four sandboxes did not all print their uid in two minutes")
		}
	}
	closeAll()
	wg.Wait()
	seen := map[string]bool{}
	for _, o := range outs {
		if seen[o] {
			t.Errorf("host uid %s used by two live sandboxes: %v", o, outs)
		}
		seen[o] = true
	}
}

func TestCancelKills(t *testing.T) {
	e := newTestEngine(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	res, err := e.Run(ctx, Spec{RootfsDir: testenv.Rootfs(t), Argv: []string{"sleep", "100"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusKilled {
		t.Errorf("status %s, want killed", res.Status)
	}
}

// StreamOutput forwards everything and keeps nothing: no cap, no kill.
func TestStreamOutput(t *testing.T) {
	e := newTestEngine(t)
	var live countingWriter
	res := runPy(t, e, "import sys\nfor _ in range(64): sys.stdout.write('x' * 65536)", func(s *Spec) {
		s.StreamOutput, s.Stdout, s.Limits.OutputBytes = true, &live, 1024
	})
	if res.Status != StatusOK || len(res.Stdout) != 0 || res.StdoutBytes != 64*65536 || live.n != 64*65536 {
		t.Fatalf("status %s kept %d counted %d forwarded %d", res.Status, len(res.Stdout), res.StdoutBytes, live.n)
	}
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// TestSignalDispositionsReset: an engine started with signals ignored (a
// shell's background job ignores SIGINT and SIGQUIT, nohup SIGHUP) passes
// none of that on: the sandboxed command starts with every signal at its
// default and none blocked.
func TestSignalDispositionsReset(t *testing.T) {
	sigs := []os.Signal{syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP}
	signal.Ignore(sigs...)
	defer signal.Reset(sigs...)
	e := newTestEngine(t) // after Ignore: its spare inits inherit it too
	res, err := e.Run(context.Background(), Spec{RootfsDir: testenv.Rootfs(t), Argv: []string{"sh", "-c", "grep -E '^Sig(Blk|Ign)' /proc/self/status"}})
	if err != nil {
		t.Fatal(err)
	}
	if out, want := mustOK(t, res), "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000"; out != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

// firstWrite sends on c at its first write: the run has printed.
type firstWrite struct {
	c    chan<- struct{}
	once sync.Once
}

func (f *firstWrite) Write(b []byte) (int, error) {
	f.once.Do(func() { f.c <- struct{}{} })
	return len(b), nil
}
