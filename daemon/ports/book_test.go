package ports

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/daemon/egress"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// ownNetns starts a process in a network namespace of its own and returns
// its pid, with a Done closed when it has been killed and reaped.
func ownNetns(t testing.TB) Target {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: makes a network namespace")
	}
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	return Target{Pid: cmd.Process.Pid, Done: done}
}

// echo serves a line echo on 127.0.0.1 in tg's namespace and returns its
// port.
func echo(t *testing.T, tg Target) int {
	t.Helper()
	l, err := egress.ListenIn(tg.Pid, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// TestDialReachesTheSandboxOnly: a connection made by Dial reaches a
// server on the sandbox's loopback and is counted; the same port on the
// host's loopback is not that server (the daemon opens nothing there).
func TestDialReachesTheSandboxOnly(t *testing.T) {
	tg := ownNetns(t)
	port := echo(t, tg)
	var b Book
	var conns, sent, recvd int64
	b.OnConn = func() { conns++ }
	b.OnBytes = func(s, r int64) { sent += s; recvd += r }
	c, err := b.Dial(context.Background(), "s1", tg, port)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "hello\n" {
		t.Fatalf("echo: %q, %v", line, err)
	}
	st, ok := b.Stats("s1")
	if !ok || st != (Stats{Connections: 1, Open: 1, Sent: 6, Received: 6}) {
		t.Errorf("stats %+v, %v", st, ok)
	}
	if conns != 1 || sent != 6 || recvd != 6 {
		t.Errorf("hooks: %d conns, %d sent, %d received", conns, sent, recvd)
	}
	c.Close()
	if st, _ := b.Stats("s1"); st.Open != 0 {
		t.Errorf("open after close: %d", st.Open)
	}
	if hc, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
		// Something of the host's listens there: it must not be the
		// sandbox's echo.
		hc.SetDeadline(time.Now().Add(2 * time.Second))
		hc.Write([]byte("host\n"))
		if l, _ := bufio.NewReader(hc).ReadString('\n'); l == "host\n" {
			t.Errorf("the sandbox's server answered on the host's loopback")
		}
		hc.Close()
	}
}

// TestDialClosedPort: nothing listening is ErrNoListener, naming the port.
func TestDialClosedPort(t *testing.T) {
	tg := ownNetns(t)
	l, err := egress.ListenIn(tg.Pid, "127.0.0.1:0") // brings lo up, as a sandbox's init does
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	var b Book
	_, err = b.Dial(context.Background(), "s1", tg, 8000)
	if !errors.Is(err, ErrNoListener) {
		t.Fatalf("err = %v, want ErrNoListener", err)
	}
	if want := "port 8000"; !strings.Contains(err.Error(), want) {
		t.Errorf("%q does not name %q", err, want)
	}
	if _, err := b.Dial(context.Background(), "s1", tg, 70000); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("port 70000: %v", err)
	}
}

// TestSandboxEndClosesConnections: the sandbox's end closes its open
// connections and forgets its stats; a dial afterwards is ErrEnded
// (session dead).
func TestSandboxEndClosesConnections(t *testing.T) {
	tg := ownNetns(t)
	port := echo(t, tg)
	var b Book
	c, err := b.Dial(context.Background(), "s1", tg, port)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := os.FindProcess(tg.Pid)
	_ = p.Kill()
	<-tg.Done
	// The echo server is the test's (the daemon's listener), so the
	// connection stays up unless the book closes it.
	c.SetReadDeadline(time.Now().Add(30 * time.Second)) // only a hang fails
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after the sandbox's end: %v, want closed", err)
	}
	if _, ok := b.Stats("s1"); ok { // forgotten before its connections are closed
		t.Errorf("stats kept after the sandbox's end")
	}
	if _, err := b.Dial(context.Background(), "s1", tg, port); !errors.Is(err, errdefs.ErrSessionDead) {
		t.Errorf("dial after the end: %v, want session dead", err)
	}
}

// BenchmarkDial is a connection made into a sandbox's namespace and
// closed (the per-request cost of the port routes); BenchmarkDialHost the
// same on the daemon's own loopback, for comparison.
func BenchmarkDial(b *testing.B) {
	tg := ownNetns(b)
	l, err := egress.ListenIn(tg.Pid, "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	go acceptAndClose(l)
	var book Book
	port := l.Addr().(*net.TCPAddr).Port
	for b.Loop() {
		c, err := book.Dial(context.Background(), "s", tg, port)
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

func BenchmarkDialHost(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	go acceptAndClose(l)
	for b.Loop() {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

func acceptAndClose(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}
