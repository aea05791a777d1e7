package egress

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// inNetns runs f on a thread in pid's network namespace.
func inNetns(t *testing.T, pid int, f func()) {
	t.Helper()
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			t.Error(err)
			return
		}
		f()
	}()
	<-done
}

// TestListenInIsOnlyInTheSandboxNamespace: the proxy's listener is reachable
// from the namespace it was made in and not from the host's.
func TestListenInIsOnlyInTheSandboxNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace")
	}
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	l, err := ListenIn(cmd.Process.Pid, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "inside")
			c.Close()
		}
	}()
	addr := l.Addr().String()
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("the listener at %s is reachable from the host's namespace", addr)
	}
	inNetns(t, cmd.Process.Pid, func() {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Errorf("dial %s inside the namespace: %v", addr, err)
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		if string(b) != "inside" {
			t.Errorf("read %q", b)
		}
	})
}
