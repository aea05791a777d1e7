package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// onOwnThread runs fn on a locked OS thread that is not the thread group
// leader and exits afterwards (it may be left in a test cgroup).
func onOwnThread(t *testing.T, fn func(tid int)) {
	t.Helper()
	done := make(chan struct{})
	var tid int
	var run func(held chan struct{})
	run = func(held chan struct{}) {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if held != nil {
			close(held)
		}
		if unix.Gettid() == unix.Getpid() {
			h := make(chan struct{})
			go run(h)
			<-h
			runtime.UnlockOSThread()
			return
		}
		defer close(done)
		tid = unix.Gettid()
		fn(tid)
	}
	go run(nil)
	<-done
	// Until it is gone the thread keeps its cgroup busy.
	task := fmt.Sprintf("/proc/self/task/%d", tid)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if _, err := os.Stat(task); os.IsNotExist(err) {
			return
		}
	}
	t.Errorf("thread %d still there", tid)
}

func readCgroups(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A thread that moves itself into a v1 cgroup moves alone (the rest of
// the process stays where it was), and a child it clones starts in that
// cgroup without ever being migrated.
func TestEnterThread(t *testing.T) {
	m := newTestManager(t)
	if m.v2 {
		t.Skip("cgroup v2: threads are not moved alone")
	}
	c := create(t, m, "thread", Limits{Pids: 8})
	leader := fmt.Sprintf("/proc/self/task/%d/cgroup", os.Getpid())
	before := readCgroups(t, leader)
	onOwnThread(t, func(tid int) {
		self := fmt.Sprintf("/proc/self/task/%d/cgroup", tid)
		if err := m.EnterThread(); err != nil {
			t.Error(err)
			return
		}
		if err := c.EnterThread(); err != nil {
			t.Error(err)
			return
		}
		in := readCgroups(t, self)
		out, err := exec.Command("cat", "/proc/self/cgroup").Output()
		if err != nil {
			t.Error(err)
		}
		if err := m.EnterThread(); err != nil {
			t.Error(err)
			return
		}
		home := readCgroups(t, self)
		for _, ctrl := range []string{"memory", "pids"} {
			if !m.Has(ctrl) {
				continue
			}
			for _, tc := range []struct{ what, cgroups, want string }{
				{"thread in the cgroup", in, "/" + m.Name() + "/thread\n"},
				{"child", string(out), "/" + m.Name() + "/thread\n"},
				{"thread back home", home, "/" + m.Name() + "\n"},
			} {
				if line := controllerLine(tc.cgroups, ctrl); !strings.HasSuffix(line+"\n", tc.want) {
					t.Errorf("%s: %s cgroup %q, want suffix %q", tc.what, ctrl, line, tc.want)
				}
			}
		}
	})
	if after := readCgroups(t, leader); after != before {
		t.Errorf("the thread group leader moved:\nbefore %s\nafter %s", before, after)
	}
	if pids, err := c.Pids(); err != nil || len(pids) != 0 {
		t.Errorf("Pids = %v (%v), want none", pids, err)
	}
}

// controllerLine returns the path of ctrl in a /proc/<pid>/cgroup text.
func controllerLine(cgroups, ctrl string) string {
	for _, l := range strings.Split(cgroups, "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) == 3 && strings.Contains(","+f[1]+",", ","+ctrl+",") {
			return f[2]
		}
	}
	return ""
}

// A process with no rights on a cgroup places itself in it, in every
// hierarchy, by writing "0" to the tasks files the cgroup's owner opened
// for it: the kernel checks the opener. Without them it is refused.
func TestTaskFiles(t *testing.T) {
	m := newTestManager(t)
	c := create(t, m, "selfplace", Limits{Pids: 8})
	if m.v2 {
		if _, err := c.TaskFiles(); !errors.Is(err, ErrController) {
			t.Fatalf("TaskFiles on v2: %v, want ErrController", err)
		}
		t.Skip("cgroup v2: a process moves through cgroup.procs")
	}
	fs, err := c.TaskFiles()
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != c.Hierarchies() || len(fs) == 0 {
		t.Fatalf("%d tasks files, %d hierarchies", len(fs), c.Hierarchies())
	}
	// nobody, with the files as fds 3.. and a direct write to the first
	// hierarchy's tasks by path as well, which must fail.
	script := "for fd in $(seq 3 $((2+" + strconv.Itoa(len(fs)) + "))); do echo 0 >&$fd || exit 9; done; " +
		"(echo 0 > " + fs[0].Name() + ") 2>/dev/null && echo path-write-allowed; cat /proc/self/cgroup"
	cmd := exec.Command("sh", "-c", script)
	cmd.ExtraFiles = fs
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	for _, f := range fs {
		f.Close()
	}
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if strings.Contains(string(out), "path-write-allowed") {
		t.Errorf("nobody wrote the tasks file by its path:\n%s", out)
	}
	if n := strings.Count(string(out), "/"+m.Name()+"/selfplace\n"); n != c.Hierarchies() {
		t.Errorf("in the cgroup in %d hierarchies, want %d:\n%s", n, c.Hierarchies(), out)
	}
}
