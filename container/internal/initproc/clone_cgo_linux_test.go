//go:build cgo

package initproc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container/internal/testenv"
)

// childEnv makes this test binary, started by vforkStart, report what it
// got (reportChild) instead of running the tests.
const childEnv = "NSBOX_VFORK_TEST_CHILD=1"

func TestMain(m *testing.M) {
	if len(os.Environ()) == 1 && os.Environ()[0] == childEnv {
		reportChild()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// reportChild writes to fd 1, with raw system calls (an *os.File could
// open the runtime's poller fds): its open fds and what they are, ids,
// session, parent-death signal and signal mask.
func reportChild() {
	var b strings.Builder
	dir, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Exit(2)
	}
	buf := make([]byte, 4096)
	n, _ := unix.Getdents(dir, buf)
	_, _, names := unix.ParseDirent(buf[:n], -1, nil)
	for _, name := range names {
		fd, _ := strconv.Atoi(name)
		if fd == dir {
			continue
		}
		target, _ := os.Readlink("/proc/self/fd/" + name)
		if strings.HasPrefix(target, "/sys/fs/cgroup/") {
			continue // the Go runtime's own, for GOMAXPROCS
		}
		fmt.Fprintf(&b, "fd %d %s\n", fd, target)
	}
	var sig int32
	unix.Syscall(unix.SYS_PRCTL, unix.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&sig)), 0)
	sid, _ := unix.Getsid(0)
	status, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "SigBlk:") || strings.HasPrefix(l, "SigIgn:") {
			fmt.Fprintln(&b, strings.Join(strings.Fields(l), " "))
		}
	}
	fmt.Fprintf(&b, "pid %d sid %d uid %d gid %d groups %d pdeathsig %d\n", unix.Getpid(), sid, unix.Getuid(), unix.Getgid(), len(must(unix.Getgroups())), sig)
	unix.Write(1, []byte(b.String()))
}

func must[T any](v T, _ error) T { return v }

// testCmd is an init-like command: this test binary in new namespaces,
// root mapped to root (so that it may exec this binary), stdio pipes and
// two extra files, like an init's.
func testCmd(t *testing.T, path string) (cmd *exec.Cmd, stdout *os.File, want []string) {
	t.Helper()
	testenv.RequireRoot(t)
	pipe := func() (*os.File, *os.File) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
		return r, w
	}
	inR, _ := pipe()
	outR, outW := pipe()
	_, errW := pipe()
	extraR, _ := pipe()
	self, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { self.Close() })
	ids := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}}
	cmd = &exec.Cmd{
		Path: path, Args: []string{"child"}, Env: []string{childEnv},
		Stdin: inR, Stdout: outW, Stderr: errW, ExtraFiles: []*os.File{extraR, self},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
			UidMappings: ids, GidMappings: ids, GidMappingsEnableSetgroups: true,
			Credential: &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}},
			Setsid:     true, Pdeathsig: syscall.SIGKILL,
		},
	}
	for i, f := range []*os.File{inR, outW, errW, extraR, self} {
		target, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("fd %d %s", i, target))
	}
	return cmd, outR, want
}

// A vfork-cloned child gets exactly the files it was given, as fds 0..n-1,
// and nothing else of the engine's; it is root in a user namespace of its
// own, leads a session, dies with its parent (SIGKILL), and starts with no
// signal blocked or ignored, as os/exec would leave it.
func TestVforkStartChild(t *testing.T) {
	cmd, out, want := testCmd(t, "/proc/self/fd/4")
	// An fd of the engine's that is not close-on-exec must not cross.
	leak, err := unix.Open("/dev/null", unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(leak)
	proc, err := vforkStart(cmd)
	if err != nil {
		t.Fatal(err)
	}
	st, err := proc.Wait()
	if err != nil || !st.Success() {
		t.Fatalf("child: %v %v", st, err)
	}
	cmd.Stdout.(*os.File).Close()
	b, err := io.ReadAll(out)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(string(b)), "\n")
	var fds []string
	for _, l := range got {
		if strings.HasPrefix(l, "fd ") {
			fds = append(fds, l)
		}
	}
	if strings.Join(fds, "\n") != strings.Join(want, "\n") {
		t.Errorf("child's fds:\n%s\nwant:\n%s", strings.Join(fds, "\n"), strings.Join(want, "\n"))
	}
	for _, w := range []string{"SigBlk: 0000000000000000", "SigIgn: 0000000000000000", "pid 1 sid 1 uid 0 gid 0 groups 0 pdeathsig 9"} {
		if !strings.Contains(string(b), w) {
			t.Errorf("child's report lacks %q:\n%s", w, b)
		}
	}
}

// A child that cannot exec reports why, and is reaped.
func TestVforkStartExecFailure(t *testing.T) {
	cmd, _, _ := testCmd(t, "/nonexistent/init")
	proc, err := vforkStart(cmd)
	if err == nil {
		proc.Kill()
		proc.Wait()
		t.Fatal("no error")
	}
	if !errors.Is(err, syscall.ENOENT) || !strings.Contains(err.Error(), "(exec)") {
		t.Errorf("error %v, want an exec failure with ENOENT", err)
	}
}

// A child whose id maps the kernel refuses gives up before it runs
// anything, and says so.
func TestVforkStartMapFailure(t *testing.T) {
	cmd, _, _ := testCmd(t, "/proc/self/fd/4")
	cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}, {ContainerID: 0, HostID: 1, Size: 1}}
	proc, err := vforkStart(cmd)
	if err == nil {
		proc.Kill()
		proc.Wait()
		t.Fatal("no error")
	}
	if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "(id maps)") {
		t.Errorf("error %v, want an id-map failure with EINVAL", err)
	}
}
