package procs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/container/sandboxinit"
)

// term is a terminal's subscription and what it has shown so far.
type term struct {
	t   *testing.T
	a   *procs.Agent
	p   *procs.Process
	out bytes.Buffer
	end *procs.End
	n   int // markers used
}

func startTerm(t *testing.T, a *procs.Agent, cmd string, args ...string) *term {
	t.Helper()
	p := start(t, a, procs.Config{Cmd: cmd, Args: args, Pty: &procs.Size{Rows: 24, Cols: 80},
		Env: map[string]string{"TERM": "xterm", "PS1": "$ "}})
	return &term{t: t, a: a, p: p}
}

func (tm *term) send(s string) {
	tm.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tm.a.SendInput(ctx, procs.Selector{Pid: tm.p.Pid}, []byte(s)); err != nil {
		tm.t.Fatalf("SendInput(%q): %v", s, err)
	}
}

// until reads the terminal until its output (from the last call on)
// contains want, and returns that output; a minute is a hang.
func (tm *term) until(want string) string {
	tm.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for !strings.Contains(tm.out.String(), want) {
		ev, err := tm.p.Next(ctx)
		if err != nil {
			tm.t.Fatalf("waiting for %q: %v; the terminal showed %q", want, err, tm.out.String())
		}
		if ev.Data != nil {
			if len(ev.Data.Stdout)+len(ev.Data.Stderr) > 0 {
				tm.t.Fatalf("a terminal's output came as stdout/stderr: %+v", ev.Data)
			}
			tm.out.Write(ev.Data.Pty)
		}
		if ev.End != nil {
			tm.t.Fatalf("the terminal ended (%+v) before showing %q; it showed %q", ev.End, want, tm.out.String())
		}
	}
	s := tm.out.String()
	i := strings.Index(s, want) + len(want)
	tm.out.Reset()
	tm.out.WriteString(s[i:])
	return s[:i]
}

// run types a command line and returns what it printed, up to a marker
// the shell computes (so that the typed line's echo is not taken for it).
func (tm *term) run(line string) string {
	tm.t.Helper()
	tm.n++
	tm.send(fmt.Sprintf("%s; echo M%d-$((6*7))\r", line, tm.n))
	return tm.until(fmt.Sprintf("M%d-42", tm.n))
}

// wait reads the terminal to its end.
func (tm *term) wait() *procs.End {
	tm.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		ev, err := tm.p.Next(ctx)
		if errors.Is(err, io.EOF) {
			return tm.end
		}
		if err != nil {
			tm.t.Fatalf("waiting for the end: %v", err)
		}
		if ev.Data != nil {
			tm.out.Write(ev.Data.Pty)
		}
		if ev.End != nil {
			tm.end = ev.End
		}
	}
}

// sandboxes are the two ways a sandbox starts: its own init
// (sandboxinit), or forked from a zygote (zygote.py's child); n agents,
// each in a sandbox of its own.
var sandboxes = []struct {
	name   string
	agents func(t *testing.T, n int) []*procs.Agent
}{
	{"cold", func(t *testing.T, n int) []*procs.Agent {
		var as []*procs.Agent
		for range n {
			_, a := startAgent(t)
			as = append(as, a)
		}
		return as
	}},
	{"zygote", func(t *testing.T, n int) []*procs.Agent {
		_, as := zygoteAgents(t, n)
		return as
	}},
}

func TestPtyShell(t *testing.T) {
	for _, sb := range sandboxes {
		t.Run(sb.name, func(t *testing.T) { testPtyShell(t, sb.agents(t, 1)[0]) })
	}
}

func testPtyShell(t *testing.T, a *procs.Agent) {
	tm := startTerm(t, a, "/bin/bash", "--norc", "-i")

	if got := tm.run("tty; stty size"); !strings.Contains(got, "/dev/pts/0") || !strings.Contains(got, "24 80") {
		t.Errorf("tty; stty size: %q, want /dev/pts/0 and 24 80", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Resize(ctx, procs.Selector{Pid: tm.p.Pid}, procs.Size{Rows: 50, Cols: 132}); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	if got := tm.run("stty size"); !strings.Contains(got, "50 132") {
		t.Errorf("stty size after Resize(50, 132): %q", got)
	}

	// Ctrl-C ends the foreground job, not the shell: the shell then runs
	// the next line, and says the job's status was 130 (SIGINT).
	// The job prints once it runs, in the terminal's foreground group.
	tm.send("sh -c 'echo READY-$((1+1)); exec sleep 1000'\r")
	tm.until("READY-2")
	tm.send("\x03")
	if got := tm.run("echo SLEPT-$?"); !strings.Contains(got, "SLEPT-130") {
		t.Errorf("after Ctrl-C: %q, want the sleep's status 130 and the shell alive", got)
	}

	// The terminal's shell is a process of the sandbox as its commands
	// are: the same uid, cgroup, namespaces and seccomp filter.
	probe := `id -u; cat /proc/self/cgroup; readlink /proc/self/ns/mnt /proc/self/ns/pid; grep -E '^(Seccomp|NoNewPrivs|CapEff)' /proc/self/status`
	plain := collect(t, start(t, a, sh(probe)))
	got := tm.run(probe)
	for _, line := range strings.Split(strings.TrimSpace(plain.stdout.String()), "\n") {
		if !strings.Contains(got, line) {
			t.Errorf("a command's %q is not the terminal's:\n%s", line, got)
		}
	}
	// Its devpts is the sandbox's own: its one terminal, no host's.
	if got := tm.run("ls /dev/pts"); strings.Contains(got, "1") {
		t.Errorf("ls /dev/pts in a sandbox with one terminal: %q", got)
	}

	tm.send("exit 7\r")
	if end := tm.wait(); end == nil || !end.Exited || end.ExitCode != 7 {
		t.Errorf("exit 7: end %+v", end)
	}
}

func TestPtyKillLeavesNothing(t *testing.T) {
	_, a := startAgent(t)
	tm := startTerm(t, a, "/bin/bash", "--norc", "-i")
	// A background job and a foreground one, each in a group of its own.
	tm.run("sleep 1001 & :")
	tm.send("sleep 1002\r")
	tm.until("sleep 1002")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Signal(ctx, procs.Selector{Pid: tm.p.Pid}, syscall.SIGKILL); err != nil {
		t.Fatalf("Signal: %v", err)
	}
	if end := tm.wait(); end == nil || end.Status != "signal: killed" {
		t.Errorf("killed terminal: end %+v", end)
	}
	// Nothing of the terminal's is left in the sandbox (30 s is a hang).
	o := collect(t, start(t, a, sh(`for i in $(seq 300); do
	  n=0; for c in /proc/[0-9]*/cmdline; do case "$(tr '\0' ' ' < $c 2>/dev/null)" in "sleep 100"*) n=$((n+1));; esac; done
	  [ $n = 0 ] && exit 0; sleep 0.1; done; echo "$n left"; exit 1`)))
	if o.end == nil || o.end.ExitCode != 0 {
		t.Errorf("sleeps of the killed terminal are left: %q %+v", o.stdout.String(), o.end)
	}
}

func TestPtyErrors(t *testing.T) {
	_, a := startAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := start(t, a, procs.Config{Cmd: "/bin/sleep", Args: []string{"1000"}, Stdin: true})
	sel := procs.Selector{Pid: p.Pid}
	if err := a.Resize(ctx, sel, procs.Size{Rows: 10, Cols: 10}); !errors.Is(err, procs.ErrNotPty) {
		t.Errorf("Resize of a process without a terminal: %v, want ErrNotPty", err)
	}
	tm := startTerm(t, a, "/bin/cat")
	if err := a.CloseStdin(ctx, procs.Selector{Pid: tm.p.Pid}); !errors.Is(err, procs.ErrNotPty) {
		t.Errorf("CloseStdin of a terminal: %v, want ErrNotPty", err)
	}
	// Ctrl-D at the start of a line is the terminal's end of input.
	tm.send("abc\r\x04")
	if end := tm.wait(); end == nil || end.ExitCode != 0 || !strings.Contains(tm.out.String(), "abc") {
		t.Errorf("cat after Ctrl-D: end %+v, output %q", end, tm.out.String())
	}
	if _, err := a.Start(ctx, procs.Config{Cmd: "/bin/sh", Pty: &procs.Size{}}); !errors.Is(err, procs.ErrStart) {
		t.Errorf("Start with a 0x0 terminal: %v, want ErrStart", err)
	}
	_ = a.Signal(ctx, sel, syscall.SIGKILL)
}

// TestPtyProbes attempts, from a terminal's shell, what a terminal could
// be used for beyond its own input and output: injecting input into a
// terminal (TIOCSTI, refused by seccomp), opening terminals without end
// (the sandbox's devpts instance stops at MaxPtys), and reaching the
// host's terminals (its devpts is its own).
func TestPtyProbes(t *testing.T) {
	for _, sb := range sandboxes {
		t.Run(sb.name, func(t *testing.T) { testPtyProbes(t, sb.agents(t, 2)) })
	}
}

// testPtyProbes runs the probe in the second sandbox while the first has
// a terminal open: the second sees its own terminal alone.
func testPtyProbes(t *testing.T, as []*procs.Agent) {
	other := startTerm(t, as[0], "/bin/bash", "--norc", "-i")
	other.run("true")
	tm := startTerm(t, as[1], "/bin/bash", "--norc", "-i")
	probe := `import os, fcntl, termios, errno
print("pts", sorted(os.listdir("/dev/pts")), os.stat("/dev/pts").st_dev == os.stat("/dev/ptmx").st_dev)
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"x")
    print("tiocsti ok")
except OSError as e:
    print("tiocsti", errno.errorcode[e.errno])
fds = []
try:
    while len(fds) < 1000:
        fds.append(os.openpty())
    print("ptys unbounded")
except OSError as e:
    print("ptys", 1 + len(fds), errno.errorcode[e.errno])  # with the shell
`
	got := tm.run(fmt.Sprintf("python3 -c '%s'", probe))
	for _, want := range []string{"tiocsti EPERM", fmt.Sprintf("ptys %d ENOSPC", sandboxinit.MaxPtys), "pts ['0', 'ptmx'] True"} {
		if !strings.Contains(got, want) {
			t.Errorf("probe: missing %q in %q", want, got)
		}
	}
}

// TestPtyOutputBounded: a terminal's flood is held to what its readers
// take. A subscriber that stops reading is dropped (ErrSlow) while the
// one that reads gets every byte; the output cap ends the terminal with
// exactly the cap delivered.
func TestPtyOutputBounded(t *testing.T) {
	_, a := startAgent(t)
	procs.SetSlowTimeout(a, 300*time.Millisecond)
	const n = 20000000
	tm := startTerm(t, a, "/bin/sh", "-c", "stty raw -echo; head -c 20000000 /dev/zero")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	slow, err := a.Connect(ctx, procs.Selector{Pid: tm.p.Pid})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	if end := tm.wait(); end == nil || end.ExitCode != 0 || tm.out.Len() != n {
		t.Fatalf("the reading subscriber: end %+v, %d bytes, want %d", end, tm.out.Len(), n)
	}
	for range slow.Events() {
	}
	if !errors.Is(slow.Err(), procs.ErrSlow) {
		t.Fatalf("the subscriber that read nothing ended with %v, want ErrSlow", slow.Err())
	}

	const limit = 1 << 20
	a.LimitOutput(limit)
	tm = startTerm(t, a, "/bin/sh", "-c", "stty raw -echo; head -c 200M /dev/zero; echo survived")
	if end := tm.wait(); end == nil || end.Status != procs.StatusOutputLimit || tm.out.Len() != limit {
		t.Fatalf("past the cap: end %+v, %d bytes, want %s and %d", end, tm.out.Len(), procs.StatusOutputLimit, limit)
	}
}

// Input that arrives as its terminal's process ends (nsbox shell's Ctrl-D
// at the end of a piped stdin, while `cat` exits) does not take the agent
// down: one select round had the process's end and its terminal's
// writability, the end unregistered the terminal, and the write handler,
// called after it in the same round, raised KeyError and killed the agent
// (the terminal ended "the process agent is closed" in about one run in
// five). Many rounds, since it is a race.
func TestPtyInputAtTheEnd(t *testing.T) {
	_, a := startAgent(t)
	for i := range 200 {
		tm := startTerm(t, a, "/bin/sh", "-c", "exit 3")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		// Refused once the process is gone (no process, stdin closed): fine.
		_ = a.SendInput(ctx, procs.Selector{Pid: tm.p.Pid}, []byte("\x04"))
		cancel()
		if end := tm.wait(); end == nil || end.ExitCode != 3 {
			t.Fatalf("round %d: the terminal's end %+v, want exit 3", i, end)
		}
	}
}
