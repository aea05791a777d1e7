package procs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/procs"
)

func TestExitCodes(t *testing.T) {
	_, a := startAgent(t)
	tests := []struct {
		name, script string
		want         procs.End
		stdout       string
	}{
		{"ok", "echo hi", procs.End{ExitCode: 0, Exited: true, Status: "exit status 0"}, "hi\n"},
		{"exit 3", "echo err >&2; exit 3", procs.End{ExitCode: 3, Exited: true, Status: "exit status 3", Error: "exit status 3"}, ""},
		{"killed", "kill -9 $$", procs.End{ExitCode: -1, Signal: syscall.SIGKILL, Status: "signal: killed", Error: "signal: killed"}, ""},
		{"terminated", "kill -TERM $$", procs.End{ExitCode: -1, Signal: syscall.SIGTERM, Status: "signal: terminated", Error: "signal: terminated"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := start(t, a, sh(tc.script))
			o := collect(t, p)
			if o.err != nil || o.start == nil || o.start.Pid != p.Pid || o.end == nil || *o.end != tc.want || o.stdout.String() != tc.stdout {
				t.Fatalf("got start %+v end %+v stdout %q err %v; want end %+v stdout %q", o.start, o.end, o.stdout.String(), o.err, tc.want, tc.stdout)
			}
		})
	}
	if len(a.List()) != 0 {
		t.Errorf("ended processes listed: %+v", a.List())
	}
}

// TestStreamsInOrder: each line reaches the subscriber while the process
// runs: the script prints a line, then waits for the test to answer it,
// which the test does only once it has the line. Output held back until
// the end would leave both waiting, and the minute's deadline fails it.
func TestStreamsInOrder(t *testing.T) {
	_, a := startAgent(t)
	cfg := sh("for i in 1 2 3; do echo $i; echo e$i >&2; read x; done")
	cfg.Stdin = true
	p := start(t, a, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var lines []string
	var nextErr error
	for {
		ev, err := p.Next(ctx)
		if err != nil {
			nextErr = err
			break
		}
		if ev.Data != nil && len(ev.Data.Stdout) > 0 {
			lines = append(lines, string(ev.Data.Stdout))
			if err := a.SendInput(ctx, procs.Selector{Pid: p.Pid}, []byte("next\n")); err != nil {
				t.Fatalf("SendInput after line %d: %v", len(lines), err)
			}
		}
	}
	if strings.Join(lines, "") != "1\n2\n3\n" || !errors.Is(nextErr, io.EOF) {
		t.Fatalf("stdout chunks %q, then %v: not streamed line by line", lines, nextErr)
	}
}

func TestEnvAndCwd(t *testing.T) {
	_, a := startAgent(t)
	cfg := sh(`echo "$FOO $PATH"; pwd`)
	cfg.Env = map[string]string{"FOO": "bar baz"}
	cfg.Cwd = "/tmp"
	o := collect(t, start(t, a, cfg))
	got := strings.Split(o.stdout.String(), "\n")
	if len(got) < 2 || !strings.HasPrefix(got[0], "bar baz /") || got[1] != "/tmp" {
		t.Fatalf("stdout %q", o.stdout.String())
	}
	o = collect(t, start(t, a, sh("pwd; echo ${MPLBACKEND:-unset}")))
	if s := o.stdout.String(); s != "/home/user\nunset\n" && s != "/workspace\nunset\n" {
		t.Fatalf("default cwd, MPLBACKEND: %q", s)
	}
}

func TestStdin(t *testing.T) {
	_, a := startAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := procs.Config{Cmd: "cat", Stdin: true, Tag: "cat"}
	p := start(t, a, cfg)
	// An empty write is a no-op that succeeds (envd's; the SDKs send
	// one for sendStdin(pid, '')): its frame carries no data field.
	if err := a.SendInput(ctx, procs.Selector{Tag: "cat"}, nil); err != nil {
		t.Fatalf("SendInput of nothing: %v", err)
	}
	if err := a.SendInput(ctx, procs.Selector{Tag: "cat"}, []byte("hello\n")); err != nil {
		t.Fatalf("SendInput: %v", err)
	}
	for {
		ev, err := p.Next(ctx)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if ev.Data != nil {
			if string(ev.Data.Stdout) != "hello\n" {
				t.Fatalf("echoed %q", ev.Data.Stdout)
			}
			break
		}
	}
	// More than a pipe holds, then EOF: cat ends.
	big := strings.Repeat("x", 1<<20)
	go func() {
		if err := a.SendInput(ctx, procs.Selector{Pid: p.Pid}, []byte(big)); err != nil {
			t.Errorf("SendInput: %v", err)
		}
		if err := a.CloseStdin(ctx, procs.Selector{Pid: p.Pid}); err != nil {
			t.Errorf("CloseStdin: %v", err)
		}
	}()
	o := collect(t, p)
	if o.end == nil || o.end.ExitCode != 0 || o.stdout.Len() != len(big) {
		t.Fatalf("end %+v, %d bytes back (want %d)", o.end, o.stdout.Len(), len(big))
	}

	q := start(t, a, procs.Config{Cmd: "sleep", Args: []string{"1000"}})
	if err := a.SendInput(ctx, procs.Selector{Pid: q.Pid}, []byte("x")); !errors.Is(err, procs.ErrStdin) {
		t.Errorf("SendInput to a process without stdin: %v, want ErrStdin", err)
	}
}

func TestSignalReachesTheGroup(t *testing.T) {
	for _, sig := range []struct {
		sig    procs.Signal
		status string
	}{{procs.SIGTERM, "signal: terminated"}, {procs.SIGKILL, "signal: killed"}} {
		t.Run(sig.status, func(t *testing.T) {
			_, a := startAgent(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := start(t, a, sh("sleep 1000 & echo $!; wait"))
			var child string
			for child == "" {
				ev, err := p.Next(ctx)
				if err != nil {
					t.Fatalf("Next: %v", err)
				}
				if ev.Data != nil {
					child = strings.TrimSpace(string(ev.Data.Stdout))
				}
			}
			if err := a.Signal(ctx, procs.Selector{Pid: p.Pid}, sig.sig); err != nil {
				t.Fatalf("Signal: %v", err)
			}
			o := collect(t, p)
			if o.end == nil || o.end.Status != sig.status || o.end.Exited {
				t.Fatalf("end %+v, want %s", o.end, sig.status)
			}
			// The shell's child was in its group: gone too, once reaped
			// (a zombie answers kill -0; a busy machine reaps it later).
			o = collect(t, start(t, a, sh(gone(child))))
			if got := o.stdout.String(); got != "gone\n" {
				t.Fatalf("the shell's child %s: %q", child, got)
			}
		})
	}
}

func TestStartErrors(t *testing.T) {
	_, a := startAgent(t)
	ctx := context.Background()
	for _, cfg := range []procs.Config{
		{Cmd: "no-such-command"},
		{Cmd: "/no/such/path"},
		{Cmd: "/workspace"},
		{Cmd: "true", Cwd: "/no/such/dir"},
	} {
		_, err := a.Start(ctx, cfg)
		if !errors.Is(err, procs.ErrStart) {
			t.Errorf("Start(%+v): %v, want ErrStart", cfg, err)
			continue
		}
		t.Logf("Start(%+v): %v", cfg, err)
		want := cfg.Cmd
		if cfg.Cwd != "" {
			want = cfg.Cwd
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if _, err := a.Connect(ctx, procs.Selector{Tag: "none"}); !errors.Is(err, procs.ErrNotFound) {
		t.Errorf("Connect to an unknown tag: %v", err)
	}
	if err := a.Signal(ctx, procs.Selector{Pid: 99999}, procs.SIGKILL); !errors.Is(err, procs.ErrNotFound) {
		t.Errorf("Signal to an unknown pid: %v", err)
	}
}

func TestConnectAndList(t *testing.T) {
	_, a := startAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := procs.Config{Cmd: "sh", Args: []string{"-c", "read x; echo got $x"}, Stdin: true, Tag: "bg"}
	p := start(t, a, cfg)
	list := a.List()
	if len(list) != 1 || list[0].Pid != p.Pid || list[0].Tag != "bg" || list[0].Config.Cmd != "sh" {
		t.Fatalf("List: %+v", list)
	}
	c, err := a.Connect(ctx, procs.Selector{Tag: "bg"})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	if err := a.SendInput(ctx, procs.Selector{Tag: "bg"}, []byte("it\n")); err != nil {
		t.Fatalf("SendInput: %v", err)
	}
	for _, sub := range []*procs.Process{p, c} {
		o := collect(t, sub)
		if o.start == nil || o.start.Pid != p.Pid || o.stdout.String() != "got it\n" || o.end == nil || o.end.ExitCode != 0 {
			t.Errorf("subscriber saw start %+v stdout %q end %+v err %v", o.start, o.stdout.String(), o.end, o.err)
		}
	}
}

func TestAgentEndsWithItsSandbox(t *testing.T) {
	r, a := startAgent(t)
	p := start(t, a, procs.Config{Cmd: "sleep", Args: []string{"1000"}})
	r.Close()
	o := collect(t, p)
	if !errors.Is(o.err, procs.ErrClosed) {
		t.Fatalf("subscription ended with %v (end %+v), want ErrClosed", o.err, o.end)
	}
	if _, err := a.Start(context.Background(), procs.Config{Cmd: "true"}); !errors.Is(err, procs.ErrClosed) {
		t.Fatalf("Start after the sandbox ended: %v", err)
	}
}

// What a command leaves behind is the agent's (a subreaper): reaped when it
// ends, not left a zombie.
// gone is a script that prints "gone" once pid has no process, dead and
// reaped, or "alive" if it still has one after a minute.
func gone(pid string) string {
	return "for i in $(seq 600); do kill -0 " + pid + " 2>/dev/null || { echo gone; exit; }; sleep 0.1; done; echo alive"
}

func TestOrphansAreReaped(t *testing.T) {
	_, a := startAgent(t)
	o := collect(t, start(t, a, sh("sleep 1000 >/dev/null 2>&1 & echo $!")))
	child := strings.TrimSpace(o.stdout.String())
	o = collect(t, start(t, a, sh("grep PPid /proc/"+child+"/status")))
	if got, want := strings.Fields(o.stdout.String()), fmt.Sprint(a.Pid()); len(got) != 2 || got[1] != want {
		t.Fatalf("the orphan's parent: %q, want the agent (%s)", o.stdout.String(), want)
	}
	o = collect(t, start(t, a, sh("kill "+child+"; "+gone(child))))
	if got := o.stdout.String(); got != "gone\n" {
		t.Fatalf("the orphan after its kill: %q", got)
	}
}
