package seccomp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "1" {
		os.Exit(childMain())
	}
	os.Exit(m.Run())
}

// outcome is what the child reported: an errno, or death by a signal.
type outcome struct {
	errno     unix.Errno
	signal    syscall.Signal // 0 if the child exited
	installNS int64
}

// compileFile compiles p and writes the program where children can read it.
func compileFile(t testing.TB, p *Profile) string {
	t.Helper()
	prog, err := p.Compile()
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	path := filepath.Join(t.TempDir(), "prog.bpf")
	if err := os.WriteFile(path, prog, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func defaultProgFile(t testing.TB) string {
	t.Helper()
	p, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	return compileFile(t, p)
}

// runChild re-execs the test binary to install progFile and run attempt.
func runChild(t testing.TB, progFile, attempt string, attr *syscall.SysProcAttr, exe string) outcome {
	t.Helper()
	if exe == "" {
		exe = os.Args[0]
	}
	dir := t.TempDir()
	if attr != nil && attr.Credential != nil {
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"=1", envProg+"="+progFile, envAttempt+"="+attempt, envDir+"="+dir)
	cmd.SysProcAttr = attr
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return outcome{signal: ws.Signal()}
		}
	}
	if err != nil {
		t.Fatalf("child %s: %v\nstdout: %s\nstderr: %s", attempt, err, &stdout, &stderr)
	}
	var o outcome
	var errno int
	if _, err := fmt.Sscanf(stdout.String(), "errno=%d install_ns=%d", &errno, &o.installNS); err != nil {
		t.Fatalf("child %s: unparsable output %q (stderr %q): %v", attempt, &stdout, &stderr, err)
	}
	o.errno = unix.Errno(errno)
	if errno != 0 && stderr.Len() > 0 {
		t.Logf("child %s stderr: %s", attempt, &stderr)
	}
	return o
}

func (o outcome) String() string {
	if o.signal != 0 {
		return "killed by " + o.signal.String()
	}
	if o.errno == 0 {
		return "success"
	}
	return fmt.Sprintf("%s (%d)", unix.ErrnoName(o.errno), int(o.errno))
}

type expectation struct {
	attempt string
	errno   unix.Errno // 0: must succeed
	// orKilled also accepts death by SIGSYS.
	orKilled bool
}

func checkAttempts(t *testing.T, progFile string, tests []expectation) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.attempt, func(t *testing.T) {
			t.Parallel()
			got := runChild(t, progFile, tc.attempt, nil, "")
			if tc.orKilled && got.signal == unix.SIGSYS {
				return
			}
			if got.signal != 0 || got.errno != tc.errno {
				want := outcome{errno: tc.errno}.String()
				if tc.orKilled {
					want += " or killed by SIGSYS"
				}
				t.Errorf("%s: got %s, want %s", tc.attempt, got, want)
			}
		})
	}
}

func TestDefaultDenies(t *testing.T) {
	prog := defaultProgFile(t)
	var tests []expectation
	for _, a := range []string{
		"mount", "umount2", "pivot_root", "chroot", "fsopen", "open_tree", "move_mount",
		"unshare-user", "unshare-ns", "setns", "ptrace-traceme", "process_vm_readv", "kcmp",
		"pidfd_getfd", "bpf", "perf_event_open", "keyctl", "add_key", "request_key",
		"io_uring_setup", "userfaultfd",
		"clone-newns", "clone-newuser", "clone-newpid", "clone-newnet", "clone-newipc",
		"clone-newuts", "clone-newcgroup",
		"socket-af_alg", "socket-af_vsock",
		"ioctl-tiocsti", "ioctl-tiocsti-hi", "ioctl-tiocsti-neg", "ioctl-tioclinux", "ioctl-tioclinux-hi",
		"personality-read-implies-exec", "personality-addr-no-randomize",
		"kexec_load", "init_module", "finit_module", "delete_module", "reboot", "acct",
		"iopl", "ioperm", "syslog", "settimeofday", "clock_settime", "adjtimex",
		"open_by_handle_at", "name_to_handle_at", "quotactl", "uselib",
		"tsync-other-thread",
	} {
		tests = append(tests, expectation{attempt: a, errno: unix.EPERM})
	}
	tests = append(tests,
		expectation{attempt: "clone3", errno: unix.ENOSYS},
		expectation{attempt: "x32-getpid", errno: unix.EPERM, orKilled: true},
	)
	checkAttempts(t, prog, tests)
}

func TestDefaultAllows(t *testing.T) {
	prog := defaultProgFile(t)
	tests := []expectation{
		{attempt: "getpid"},
		{attempt: "file"},
		{attempt: "fork-exec"},
		{attempt: "threads-gc"},
		{attempt: "socket-af_inet"},
		{attempt: "socket-af_inet6"},
		{attempt: "socket-af_unix"},
		{attempt: "socket-af_netlink"},
		{attempt: "ioctl-tcgets", errno: unix.ENOTTY},
		{attempt: "personality-query"},
		{attempt: "personality-linux"},
	}
	if _, err := exec.LookPath("python3"); err == nil {
		tests = append(tests, expectation{attempt: "python"})
	} else {
		t.Log("python3 not installed: skipping the python probe")
	}
	checkAttempts(t, prog, tests)
}

// TestX32Killed pins the stronger outcome: libseccomp's x86_64 filter sends
// x32 numbers to the bad-arch action, KILL_PROCESS.
func TestX32Killed(t *testing.T) {
	if got := runChild(t, defaultProgFile(t), "x32-getpid", nil, ""); got.signal != unix.SIGSYS {
		t.Errorf("x32 getpid: got %s, want killed by SIGSYS", got)
	}
}

func TestLoadedProfile(t *testing.T) {
	f, err := os.Open("testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	p, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	prog := compileFile(t, p)
	tests := []expectation{
		{attempt: "getppid", errno: unix.EACCES}, // applied
		{attempt: "getpgrp"},                     // includes.caps: skipped
		{attempt: "getsid", errno: unix.EAGAIN},  // excludes.caps: applied
		{attempt: "getpriority"},                 // other arch, future kernel: skipped
		{attempt: "getcpu", errno: unix.EIO},     // minKernel 3.0: applied
		{attempt: "getpid"},                      // default ALLOW
		// Default ALLOW: TIOCSTI reaches the kernel, which refuses it on
		// /dev/null with ENOTTY.
		{attempt: "ioctl-tiocsti", errno: unix.ENOTTY},
	}
	checkAttempts(t, prog, tests)
	t.Run("acct", func(t *testing.T) {
		if got := runChild(t, prog, "acct", nil, ""); got.signal != unix.SIGSYS {
			t.Errorf("acct under SCMP_ACT_KILL_PROCESS: got %s, want killed by SIGSYS", got)
		}
	})
}

// TestInstallUnprivileged installs the default program as uid/gid 65534
// with no capabilities: no_new_privs is all seccomp needs.
func TestInstallUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("requires root: switches to uid 65534 to prove an unprivileged install")
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe := filepath.Join(dir, "seccomp.test")
	copyFile(t, os.Args[0], exe)
	prog := filepath.Join(dir, "prog.bpf")
	copyFile(t, defaultProgFile(t), prog)
	attr := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	for _, tc := range []expectation{{attempt: "getpid"}, {attempt: "unshare-user", errno: unix.EPERM}, {attempt: "clone3", errno: unix.ENOSYS}} {
		if got := runChild(t, prog, tc.attempt, attr, exe); got.signal != 0 || got.errno != tc.errno {
			t.Errorf("%s as uid 65534: got %s, want %s", tc.attempt, got, outcome{errno: tc.errno})
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkInstall measures one Install of the default program in a fresh
// process: install-ns/op is the prctl + seccomp TSYNC itself, as the child
// times it; ns/op also counts the re-exec that carries it. That the
// program lets the child run at all is TestDefaultAllows's to check.
func BenchmarkInstall(b *testing.B) {
	prog := defaultProgFile(b)
	var total int64
	for b.Loop() {
		o := runChild(b, prog, "getpid", nil, "")
		if o.signal != 0 || o.errno != 0 {
			b.Fatalf("getpid under the default program: %v", o)
		}
		total += o.installNS
	}
	b.ReportMetric(float64(total)/float64(b.N), "install-ns/op")
}

func TestCompileDefault(t *testing.T) {
	p, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	a, err := p.Compile()
	if err != nil {
		t.Fatal(err)
	}
	if a.Len() < 100 || a.Len() > 1000 || len(a)%8 != 0 {
		t.Fatalf("default program: %d bytes, %d instructions; want 100-1000 whole instructions", len(a), a.Len())
	}
	t.Logf("default program: %d instructions", a.Len())
	b, err := p.Compile()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("two compiles of the default profile differ")
	}
	// Every jump stays inside the program and it ends in a return.
	for i := range a.Len() {
		in := a.insn(i)
		if in.code&bpfClassMsk != bpfJmp {
			continue
		}
		far := i + 1 + int(max(in.jt, in.jf))
		if in.code == bpfJmp|bpfJA {
			far = i + 1 + int(in.k)
		}
		if far >= a.Len() {
			t.Fatalf("instruction %d jumps to %d, past the end (%d)", i, far, a.Len())
		}
	}
	if last := a.insn(a.Len() - 1); last.code != bpfRet|bpfK {
		t.Errorf("last instruction %+v is not a return", last)
	}
}

func TestCompileRejectsContradictions(t *testing.T) {
	tests := []struct{ name, json, want string }{
		{"two unconditional actions",
			`{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW"},{"names":["read"],"action":"SCMP_ACT_KILL_PROCESS"}]}`,
			"read has two unconditional actions"},
		{"conditional allow under a deny",
			`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["ioctl"],"action":"SCMP_ACT_ERRNO"},{"names":["ioctl"],"action":"SCMP_ACT_ALLOW","args":[{"index":1,"value":1,"op":"SCMP_CMP_EQ"}]}]}`,
			"conditional SCMP_ACT_ALLOW under the unconditional SCMP_ACT_ERRNO"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Load(strings.NewReader(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Compile()
			if !errors.Is(err, ErrCompile) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Compile error = %v, want ErrCompile mentioning %q", err, tc.want)
			}
		})
	}
}

func TestCompileSkipsUnknownNames(t *testing.T) {
	p, err := Load(strings.NewReader(`{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read","nsbox_no_such_syscall"],"action":"SCMP_ACT_ALLOW"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Compile(); err != nil {
		t.Errorf("Compile with an unknown name: %v", err)
	}
}

func TestInstallRejectsBadProgram(t *testing.T) {
	for _, p := range []Program{nil, make(Program, 7), make(Program, 8*(maxInsns+1))} {
		if err := p.Install(); !errors.Is(err, ErrInvalidProgram) {
			t.Errorf("Install(%d bytes) = %v, want ErrInvalidProgram", len(p), err)
		}
	}
}

func BenchmarkCompileDefault(b *testing.B) {
	p, err := Default()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := p.Compile(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDefaultAndCompile(b *testing.B) {
	for b.Loop() {
		p, err := Default()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Compile(); err != nil {
			b.Fatal(err)
		}
	}
}
