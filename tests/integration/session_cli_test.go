package integration

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/agentapi"
)

// replTerm is `nsbox repl` on a pseudo-terminal: keys go in, the screen
// collects what it prints.
type replTerm struct {
	t      *testing.T
	pty    io.Writer
	screen *lockedBuffer
}

// waitFor waits until the screen shows want n times in all.
func (r *replTerm) waitFor(want string, n int) {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(r.screen.String(), want) < n {
		if time.Now().After(deadline) {
			r.t.Fatalf("the REPL did not show %q %d times; screen:\n%s", want, n, r.screen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitCellRuns waits until the REPL's session runs a cell and the
// terminal is out of raw mode (Ctrl-C is a signal again, as the REPL
// wants while a cell runs).
func (r *replTerm) waitCellRuns(d *daemon, ptmx *os.File) {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		busy := false
		if l, err := d.client.Sessions(context.Background()); err == nil {
			for _, s := range l {
				busy = busy || s.State == agentapi.SessionBusy
			}
		}
		tio, err := unix.IoctlGetTermios(int(ptmx.Fd()), unix.TCGETS)
		if err != nil {
			r.t.Fatal(err)
		}
		if busy && tio.Lflag&unix.ISIG != 0 {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("no cell running with the terminal out of raw mode after 20 s (a session busy: %v, ISIG: %v); screen:\n%s", busy, tio.Lflag&unix.ISIG != 0, r.screen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *replTerm) keys(s string) {
	r.t.Helper()
	if _, err := io.WriteString(r.pty, s); err != nil {
		r.t.Fatal(err)
	}
}

// TestReplOnTerminal drives `nsbox repl` as a user at a terminal would
// (issue 22): Ctrl-C interrupts a running cell and the next cell sees the
// state from before; arrow keys edit and recall lines; Ctrl-C at a
// continuation prompt drops an unclosed bracket; Ctrl-D quits and ends the
// session.
func TestReplOnTerminal(t *testing.T) {
	d := startDaemon(t)
	cmd := execNsbox("repl", "--socket", d.sock)
	ptmx, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	r := &replTerm{t: t, pty: ptmx, screen: &lockedBuffer{}}
	go io.Copy(r.screen, ptmx)
	defer func() {
		if t.Failed() {
			_ = cmd.Process.Kill()
		}
	}()

	r.waitFor(">>> ", 1)
	r.keys("x = 41\r")
	r.waitFor(">>> ", 2)

	// Ctrl-C interrupts the cell; the session and x live on.
	r.keys("while True: pass\r")
	r.waitCellRuns(d, ptmx)
	r.keys("\x03")
	// The Ctrl-C, not the cell's 30 s timeout: waitFor gives up at 20 s, and
	// a timeout would say so.
	r.waitFor("KeyboardInterrupt", 1)
	if strings.Contains(r.screen.String(), "[timeout:") {
		t.Errorf("the cell ended by its timeout, not the Ctrl-C:\n%s", r.screen)
	}
	r.keys("x + 1\r")
	r.waitFor("\n42\r\n", 1)

	// Left moves the cursor to insert; Up recalls the line.
	r.keys("prnt(6*9)" + strings.Repeat("\x1b[D", 7) + "i\r")
	r.waitFor("\n54\r\n", 1)
	r.keys("\x1b[A\r")
	r.waitFor("\n54\r\n", 2)

	// An unclosed bracket: Ctrl-C at "... " drops it.
	r.keys("print((1)\r")
	r.waitFor("... ", 1)
	r.keys("\x03")
	r.waitFor("KeyboardInterrupt", 2)
	r.keys("5 * 11\r")
	r.waitFor("\n55\r\n", 1)

	// Ctrl-D quits; the session is gone.
	r.keys("\x04")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("repl: %v; screen:\n%s", err, r.screen)
		}
	case <-time.After(time.Minute):
		t.Fatalf("repl did not exit on Ctrl-D; screen:\n%s", r.screen)
	}
	ss, err := d.client.Sessions(context.Background())
	if err != nil || len(ss) != 0 {
		t.Errorf("sessions after the REPL quit: %+v, %v", ss, err)
	}
}

// TestSessionCLI: session create takes exec's limit flags, flags may
// follow the arguments, and session exec exits as exec does (issue 22).
func TestSessionCLI(t *testing.T) {
	d := startDaemon(t)
	// 5 s: the execs that end in time do on a busy machine too; the loop
	// is cut at it.
	out, errOut, code := runCLI(t, "", "session", "create", "--memory", "128M", "--timeout", "5s", "--env", "WHO=cli", "--socket", d.sock)
	id := strings.TrimSpace(out)
	if code != 0 || id == "" {
		t.Fatalf("session create: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, tc := range []struct {
		name, code string
		wantOut    string
		wantCode   int
	}{
		{"value", "import os; x = os.environ['WHO']; x", "'cli'\n", 0},
		{"state kept", "x * 2", "'clicli'\n", 0},
		{"exception", "1/0", "", 1},
		{"timeout", "while True: pass", "", 124},
		{"after the timeout", "x", "'cli'\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, "", "session", "exec", id, tc.code, "--socket", d.sock)
			if code != tc.wantCode || out != tc.wantOut {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stdout %q", code, out, errOut, tc.wantCode, tc.wantOut)
			}
		})
	}
	if _, errOut, code := runCLI(t, "", "session", "rm", id, "--socket", d.sock); code != 0 {
		t.Errorf("session rm: exit %d: %s", code, errOut)
	}
}

// TestSessionCLIInit: session create --init gives the session a minimal
// init as pid 1; without it the interpreter is pid 1.
func TestSessionCLIInit(t *testing.T) {
	d := startDaemon(t)
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{nil, "True\n"},
		{[]string{"--init"}, "False\n"},
	} {
		args := append(append([]string{"session", "create"}, tc.flags...), "--socket", d.sock)
		out, errOut, code := runCLI(t, "", args...)
		id := strings.TrimSpace(out)
		if code != 0 || id == "" {
			t.Fatalf("session create %v: exit %d, stdout %q, stderr %q", tc.flags, code, out, errOut)
		}
		out, errOut, code = runCLI(t, "", "session", "exec", id, "import os; print(os.getpid() == 1)", "--socket", d.sock)
		if code != 0 || out != tc.want {
			t.Errorf("session create %v: pid 1 is the interpreter: exit %d, stdout %q, stderr %q; want %q", tc.flags, code, out, errOut, tc.want)
		}
		runCLI(t, "", "session", "rm", id, "--socket", d.sock)
	}
}
