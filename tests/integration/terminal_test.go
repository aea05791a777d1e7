package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// clientTerm reads a /v1 terminal's output up to markers.
type clientTerm struct {
	t    *testing.T
	term *client.Terminal
	out  strings.Builder
	n    int
}

// run types line and returns what the terminal showed up to a marker the
// shell computes (the typed line's echo is not it).
func (c *clientTerm) run(line string) string {
	c.t.Helper()
	c.n++
	if err := c.term.Input([]byte(fmt.Sprintf("%s; echo M%d-$((6*7))\r", line, c.n))); err != nil {
		c.t.Fatalf("Input: %v", err)
	}
	return c.until(fmt.Sprintf("M%d-42", c.n))
}

func (c *clientTerm) until(want string) string {
	c.t.Helper()
	for !strings.Contains(c.out.String(), want) {
		out, exit, err := c.term.Next()
		if err != nil || exit != nil {
			c.t.Fatalf("waiting for %q: exit %+v, %v; the terminal showed %q", want, exit, err, c.out.String())
		}
		c.out.Write(out)
	}
	s := c.out.String()
	i := strings.Index(s, want) + len(want)
	c.out.Reset()
	c.out.WriteString(s[i:])
	return s[:i]
}

// TestTerminal drives a terminal through /v1 and the Go client: a bash
// on a terminal of the session's sandbox, its size and a resize seen by
// stty, Ctrl-C ending a foreground sleep and not the shell, the session's
// files, and the exit code.
func TestTerminal(t *testing.T) {
	d := startDaemon(t)
	_, rootfs := testRootfs(t)
	ctx := context.Background()

	plain := newSession(t, d, &agentapi.SessionRequest{Rootfs: rootfs})
	if _, err := d.client.OpenTerminal(ctx, plain, &agentapi.TerminalRequest{}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a terminal in a session without terminals: %v, want invalid_argument", err)
	}
	id := newSession(t, d, &agentapi.SessionRequest{Rootfs: rootfs, Processes: true})
	execOK(t, d, id, "open('/workspace/from-python', 'w').write('hello')")
	resp, err := d.http.Post("http://nsbox/v1/sessions/"+id+"/terminal", agentapi.ContentTypeJSON, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a terminal asked without an upgrade: %s, want 400", resp.Status)
	}
	term, err := d.client.OpenTerminal(ctx, id, &agentapi.TerminalRequest{Cmd: "/bin/bash", Args: []string{"--norc", "-i"},
		Env: map[string]string{"PS1": "$ "}, Rows: 30, Cols: 90})
	if err != nil {
		t.Fatalf("OpenTerminal: %v", err)
	}
	defer term.Close()
	if term.Pid == 0 {
		t.Error("no terminal pid")
	}
	c := &clientTerm{t: t, term: term}
	if got := c.run("stty size; cat /workspace/from-python; id -u"); !strings.Contains(got, "30 90") || !strings.Contains(got, "hello") || !strings.Contains(got, "1000") {
		t.Errorf("stty size, the session's file, uid: %q", got)
	}
	if err := term.Resize(45, 120); err != nil {
		t.Fatal(err)
	}
	if got := c.run("stty size"); !strings.Contains(got, "45 120") {
		t.Errorf("stty size after a resize to 45x120: %q", got)
	}
	if err := term.Input([]byte("sh -c 'echo READY-$((1+1)); exec sleep 1000'\r")); err != nil {
		t.Fatal(err)
	}
	c.until("READY-2")
	if err := term.Input([]byte("\x03")); err != nil {
		t.Fatal(err)
	}
	if got := c.run("echo SLEPT-$?"); !strings.Contains(got, "SLEPT-130") {
		t.Errorf("after Ctrl-C: %q, want the sleep's 130 and the shell alive", got)
	}
	if err := term.Input([]byte("exit 5\r")); err != nil {
		t.Fatal(err)
	}
	var exit *agentapi.TerminalExit
	for exit == nil {
		out, x, err := term.Next()
		if err != nil {
			t.Fatalf("before the exit: %v (output %q)", err, c.out.String())
		}
		c.out.Write(out)
		exit = x
	}
	if exit.ExitCode != 5 || exit.Status != "exit status 5" {
		t.Errorf("exit %+v, want 5", exit)
	}
	if _, _, err := term.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the exit: %v, want EOF", err)
	}
}

// TestTerminalClosedLeavesNothing: a client that goes (its connection
// closed) takes its terminal with it, and the jobs the shell started.
func TestTerminalClosedLeavesNothing(t *testing.T) {
	d := startDaemon(t)
	_, rootfs := testRootfs(t)
	id := newSession(t, d, &agentapi.SessionRequest{Rootfs: rootfs, Processes: true})
	term, err := d.client.OpenTerminal(context.Background(), id, &agentapi.TerminalRequest{Cmd: "/bin/bash", Args: []string{"--norc", "-i"}})
	if err != nil {
		t.Fatalf("OpenTerminal: %v", err)
	}
	c := &clientTerm{t: t, term: term}
	c.run("sleep 1001 & :")
	if err := term.Input([]byte("sleep 1002\r")); err != nil {
		t.Fatal(err)
	}
	term.Close()
	// Polled from the session (25 s is a hang; an exec has 30): no sleep is left.
	res := execOK(t, d, id, `
import os, time
def sleeps():
    n = 0
    for p in os.listdir('/proc'):
        try:
            if p.isdigit() and open('/proc/%s/cmdline' % p, 'rb').read().startswith(b'sleep\x00100'):
                n += 1
        except OSError:
            pass
    return n
for _ in range(250):
    if sleeps() == 0:
        break
    time.sleep(0.1)
print("left", sleeps())
`)
	if !strings.Contains(res.Stdout, "left 0") {
		t.Errorf("after the client went: %q", res.Stdout)
	}
}

// TestShellOnTerminal drives `nsbox shell` at a real terminal (a pty of
// the test's): the shell sees the terminal's size, and a resize of it
// (SIGWINCH to nsbox, passed on); Ctrl-C ends a foreground sleep and not
// the shell; the shell's exit code is nsbox's; the fresh session is gone
// after. Another uid cannot open a terminal in root's session.
func TestShellOnTerminal(t *testing.T) {
	d := startDaemon(t)
	_, rootfs := testRootfs(t)
	cmd := execNsbox("shell", "--socket", d.sock, "--rootfs", rootfs, "--", "/bin/bash", "--norc", "-i")
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	r := &replTerm{t: t, pty: ptmx, screen: &lockedBuffer{}}
	go io.Copy(r.screen, ptmx)
	defer func() {
		if t.Failed() {
			_ = cmd.Process.Kill()
		}
	}()

	r.keys("stty size; echo M1-$((6*7))\r")
	r.waitFor("M1-42", 1)
	if !strings.Contains(r.screen.String(), "40 120") {
		t.Errorf("stty size at 40x120:\n%s", r.screen)
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 50, Cols: 132}); err != nil {
		t.Fatal(err)
	}
	// The resize and the next line travel apart (SIGWINCH, the keys): the
	// line is typed again until the new size shows (20 s is a hang).
	deadline := time.Now().Add(20 * time.Second)
	for i := 2; !strings.Contains(r.screen.String(), "50 132"); i++ {
		if time.Now().After(deadline) {
			t.Fatalf("stty size never showed the resize to 50x132:\n%s", r.screen)
		}
		r.keys(fmt.Sprintf("stty size; echo M%d-$((6*7))\r", i))
		r.waitFor(fmt.Sprintf("M%d-42", i), 1)
	}
	r.keys("sh -c 'echo READY-$((1+1)); exec sleep 1000'\r")
	r.waitFor("READY-2", 1)
	r.keys("\x03")
	r.keys("echo SLEPT-$?\r")
	r.waitFor("SLEPT-130", 1)
	r.keys("exit 3\r")
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("nsbox shell after exit 3: %v, want exit status 3\n%s", err, r.screen)
	}
	if ss, err := d.client.Sessions(context.Background()); err != nil || len(ss) != 0 {
		t.Errorf("sessions after nsbox shell: %+v %v, want none", ss, err)
	}

	// root's session with terminals: another uid gets not_found.
	id := newSession(t, d, &agentapi.SessionRequest{Rootfs: rootfs, Processes: true})
	openToAll(t, d)
	out, err := asNobody(t, nsboxCopy(t), d, "shell", "--session", id, "/bin/true")
	if err == nil || !strings.Contains(out, "not_found") {
		t.Errorf("nsbox shell --session (root's) as nobody: %v\n%s\nwant not_found", err, out)
	}
}

// Input racing its terminal's end (nsbox shell sends Ctrl-D at the end of
// a piped stdin as the command exits) leaves the exit to be told: the
// daemon's input loop took the input's refusal (no such process) for the
// client's going and cancelled the output loop before it wrote the exit,
// and the client saw the connection end without one (2 of 30 `nsbox
// shell -- cat FILE </dev/null`). Many rounds, since it is a race.
func TestTerminalExitRacesInput(t *testing.T) {
	d := startDaemon(t)
	_, rootfs := testRootfs(t)
	id := newSession(t, d, &agentapi.SessionRequest{Rootfs: rootfs, Processes: true})
	for i := range 60 {
		term, err := d.client.OpenTerminal(context.Background(), id, &agentapi.TerminalRequest{Cmd: "/bin/sh", Args: []string{"-c", "echo bye; exit 3"}})
		if err != nil {
			t.Fatalf("round %d: OpenTerminal: %v", i, err)
		}
		// Ctrl-D, again and again until the exit is read: some of it
		// arrives after the command's end.
		done := make(chan struct{})
		go func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if term.Input([]byte{4}) != nil {
					return
				}
			}
		}()
		var shown []byte
		for {
			out, exit, err := term.Next()
			if err != nil {
				close(done)
				t.Fatalf("round %d: %v, want the exit (the terminal showed %q)", i, err, shown)
			}
			shown = append(shown, out...)
			if exit != nil {
				close(done)
				if exit.ExitCode != 3 {
					t.Fatalf("round %d: exit %+v, want code 3", i, exit)
				}
				break
			}
		}
		term.Close()
	}
}

// An open terminal holds its session in use: a user at a shell types no
// execs, and the session outlives its idle timeout however long the
// terminal is quiet; closed, the session idles out as any.
func TestTerminalHoldsItsSession(t *testing.T) {
	d := startDaemon(t)
	_, rootfs := testRootfs(t)
	ctx := context.Background()
	id := newSession(t, d, &agentapi.SessionRequest{Rootfs: rootfs, Processes: true, IdleTimeoutMs: 500})
	term, err := d.client.OpenTerminal(ctx, id, &agentapi.TerminalRequest{Cmd: "/bin/bash", Args: []string{"--norc", "-i"}, Env: map[string]string{"PS1": "$ "}})
	if err != nil {
		t.Fatalf("OpenTerminal: %v", err)
	}
	c := &clientTerm{t: t, term: term}
	time.Sleep(2 * time.Second) // four idle timeouts, quiet: time passing is what is tested
	if got := c.run("echo still-$((2+2))"); !strings.Contains(got, "still-4") {
		t.Fatalf("the terminal after four quiet idle timeouts: %q", got)
	}
	if s, err := d.client.Session(ctx, id); err != nil || s.State == "dead" {
		t.Fatalf("the held session: %+v, %v; want it alive", s, err)
	}
	term.Close()
	// Released, it idles out (a minute is a hang).
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		s, err := d.client.Session(ctx, id)
		if err != nil || s.State == "dead" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session a minute after its terminal closed: %+v", s)
		}
	}
}
