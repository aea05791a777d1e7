package guest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/internal/agenttest"
	"github.com/nsbox/nsbox/container/internal/testenv"
	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/container/runner"
	"github.com/nsbox/nsbox/container/runner/guest"
)

func TestMain(m *testing.M) { agenttest.Main(m) }

// agent starts a Python runner on rootfs and its process agent, which
// guests are started through; all end at cleanup.
func agent(t *testing.T, rootfs string) *procs.Agent {
	t.Helper()
	_, a := agenttest.Start(t, rootfs)
	return a
}

func start(t *testing.T, a *procs.Agent, k guest.Kind, o guest.Options) *guest.Guest {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := guest.Start(ctx, a, k, o)
	if err != nil {
		t.Fatalf("guest.Start(%s): %v", k, err)
	}
	t.Cleanup(g.Close)
	return g
}

func run(t *testing.T, g *guest.Guest, req guest.ExecRequest) *guest.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := g.Exec(ctx, req)
	if err != nil {
		t.Fatalf("Exec(%q): %v", req.Code, err)
	}
	return res
}

// TestBashSession: a bash guest keeps its variables, functions and cwd
// from cell to cell, a cell's env is its own (exported to what it
// starts), its stdin is not the guest's requests, and a failing last
// command is the cell's exit code.
func TestBashSession(t *testing.T) {
	g := start(t, agent(t, testenv.Rootfs(t)), guest.Bash, guest.Options{Cwd: "/tmp", Env: map[string]string{"SANDBOX_VAR": "kept"}})
	steps := []struct {
		code   string
		env    map[string]string
		stdout string
		exit   int
	}{
		{code: "pwd; echo $SANDBOX_VAR", stdout: "/tmp\nkept\n"},
		{code: "x=41; f() { echo f$1; }; cd /", stdout: ""},
		{code: "echo $((x+1)); f 2; pwd", stdout: "42\nf2\n/\n"},
		{code: "echo $FOO; sh -c 'echo child:$FOO'", env: map[string]string{"FOO": "it's bar"}, stdout: "it's bar\nchild:it's bar\n"},
		{code: "echo ${FOO:-unset}", stdout: "unset\n"},
		{code: "read line; echo read:$?", stdout: "read:1\n"},
		{code: "echo out; echo err >&2; false", stdout: "out\n", exit: 1},
		{code: "echo still here", stdout: "still here\n"},
	}
	for _, s := range steps {
		res := run(t, g, guest.ExecRequest{Code: s.code, Env: s.env})
		if string(res.Stdout) != s.stdout || res.ExitCode != s.exit {
			t.Fatalf("%q: stdout %q exit %d (%s, stderr %q); want %q exit %d", s.code, res.Stdout, res.ExitCode, res.Status, res.Stderr, s.stdout, s.exit)
		}
		want := runner.StatusOK
		if s.exit != 0 {
			want = runner.StatusException
		}
		if res.Status != want {
			t.Fatalf("%q: status %s, want %s", s.code, res.Status, want)
		}
	}
}

// TestBashLimits: a cell's timeout interrupts its command and the session
// lives on; a cell past its output cap is cut there; a cell that ignores
// its interrupt has the guest killed, and the next Exec says it is dead;
// a cell that exits the shell ends the guest.
func TestBashLimits(t *testing.T) {
	a := agent(t, testenv.Rootfs(t))
	g := start(t, a, guest.Bash, guest.Options{})
	run(t, g, guest.ExecRequest{Code: "y=kept"})
	res := run(t, g, guest.ExecRequest{Code: "sleep 60; echo after", Timeout: 200 * time.Millisecond})
	if res.Status != runner.StatusTimeout || res.Killed || string(res.Stdout) != "after\n" {
		t.Fatalf("sleep past its timeout: %s killed=%v stdout %q", res.Status, res.Killed, res.Stdout)
	}
	if res := run(t, g, guest.ExecRequest{Code: "echo $y"}); string(res.Stdout) != "kept\n" {
		t.Fatalf("after a timeout: %q (%s %s)", res.Stdout, res.Status, res.Error)
	}
	res = run(t, g, guest.ExecRequest{Code: "yes | head -c 100000", OutputBytes: 1000})
	if res.Status != runner.StatusOutputLimit || len(res.Stdout) != 1000 || !res.StdoutTruncated {
		t.Fatalf("flood: %s, %d bytes, truncated=%v", res.Status, len(res.Stdout), res.StdoutTruncated)
	}
	res = run(t, g, guest.ExecRequest{Code: "trap '' INT; while :; do :; done", Timeout: 100 * time.Millisecond})
	if res.Status != runner.StatusTimeout || !res.Killed {
		t.Fatalf("a cell that ignores SIGINT: %s killed=%v", res.Status, res.Killed)
	}
	if _, err := g.Exec(context.Background(), guest.ExecRequest{Code: "echo"}); !errors.Is(err, runner.ErrDead) {
		t.Fatalf("Exec after the kill: %v, want ErrDead", err)
	}
	g2 := start(t, a, guest.Bash, guest.Options{})
	res = run(t, g2, guest.ExecRequest{Code: "echo bye; exit 3"})
	if res.Status != runner.StatusCrashed || res.ExitCode != 3 || string(res.Stdout) != "bye\n" || g2.Dead() == "" {
		t.Fatalf("exit 3: %s exit %d stdout %q dead %q", res.Status, res.ExitCode, res.Stdout, g2.Dead())
	}
	if _, err := g2.Exec(context.Background(), guest.ExecRequest{Code: "echo a\x00b"}); !errors.Is(err, runner.ErrDead) {
		t.Fatalf("Exec after exit: %v", err)
	}
}

// TestBashMarkerInOutput: output that looks like a marker's start, split
// over many writes, passes through whole.
func TestBashMarkerInOutput(t *testing.T) {
	g := start(t, agent(t, testenv.Rootfs(t)), guest.Bash, guest.Options{})
	res := run(t, g, guest.ExecRequest{Code: `for i in 1 2 3; do printf '\033]nsbox-guest-'; sleep 0.01; done; echo`})
	if want := strings.Repeat("\x1b]nsbox-guest-", 3) + "\n"; string(res.Stdout) != want {
		t.Fatalf("stdout %q, want %q", res.Stdout, want)
	}
	if _, err := g.Exec(context.Background(), guest.ExecRequest{Code: "echo a\x00b"}); !errors.Is(err, guest.ErrNoBytes) {
		t.Fatalf("a NUL in a bash cell: %v", err)
	}
}

// TestNodeGuest: a JavaScript guest keeps its variables, answers with the
// last expression's value, an exception with its name, strips TypeScript
// types, and has contexts of its own.
func TestNodeGuest(t *testing.T) {
	g := start(t, agent(t, testenv.NodeRootfs(t)), guest.JavaScript, guest.Options{Cwd: "/tmp"})
	res := run(t, g, guest.ExecRequest{Code: "let x = 41; console.log('hi'); console.error('e')"})
	if res.Status != runner.StatusOK || string(res.Stdout) != "hi\n" || string(res.Stderr) != "e\n" {
		t.Fatalf("first cell: %s %q %q %+v", res.Status, res.Stdout, res.Stderr, res.Exception)
	}
	if res := run(t, g, guest.ExecRequest{Code: "x + 1"}); res.Value != "42" || res.Count != 2 {
		t.Fatalf("x + 1: value %q count %d (%s)", res.Value, res.Count, res.Status)
	}
	if res := run(t, g, guest.ExecRequest{Code: "process.cwd() + ':' + process.env.FOO", Env: map[string]string{"FOO": "bar"}}); res.Value != "'/tmp:bar'" {
		t.Fatalf("cwd and env: %q", res.Value)
	}
	if res := run(t, g, guest.ExecRequest{Code: "await Promise.resolve('later')"}); res.Value != "'later'" {
		t.Fatalf("top-level await: %q %+v", res.Value, res.Exception)
	}
	res = run(t, g, guest.ExecRequest{Code: "\n  import { readFileSync as r } from 'fs'\n  import * as p from 'path'\n  import os from 'os'\n  console.log(typeof r, p.sep, typeof os.cpus)"})
	if string(res.Stdout) != "function / function\n" {
		t.Fatalf("static imports: %q %+v", res.Stdout, res.Exception)
	}
	if res := run(t, g, guest.ExecRequest{Code: "typeof r"}); res.Value != "'function'" {
		t.Fatalf("an imported name in the next cell: %q %+v", res.Value, res.Exception)
	}
	res = run(t, g, guest.ExecRequest{Code: "null.y"})
	if res.Status != runner.StatusException || res.Exception == nil || res.Exception.Name != "TypeError" {
		t.Fatalf("null.y: %s %+v", res.Status, res.Exception)
	}
	if res := run(t, g, guest.ExecRequest{Code: "const m: string = 'ts'; m", Transform: runner.StripTypes}); res.Value != "'ts'" {
		t.Fatalf("TypeScript: %q %+v", res.Value, res.Exception)
	}
	if res := run(t, g, guest.ExecRequest{Code: "typeof x", Context: "other"}); res.Value != "'undefined'" {
		t.Fatalf("another context sees x: %q", res.Value)
	}
	if err := g.DropContext(context.Background(), ""); err != nil {
		t.Fatalf("DropContext: %v", err)
	}
	if res := run(t, g, guest.ExecRequest{Code: "typeof x"}); res.Value != "'undefined'" {
		t.Fatalf("x after the default context was emptied: %q", res.Value)
	}
	res = run(t, g, guest.ExecRequest{Code: "while (true) {}", Timeout: 200 * time.Millisecond})
	if res.Status != runner.StatusTimeout || res.Killed {
		t.Fatalf("a busy loop past its timeout: %s killed=%v %+v", res.Status, res.Killed, res.Exception)
	}
	if res := run(t, g, guest.ExecRequest{Code: "1 + 1"}); res.Value != "2" {
		t.Fatalf("after an interrupt: %q %s", res.Value, res.Error)
	}
}

// TestBashForgedEnd: a cell can read its own marker (it is in the
// session's variables) and print a forged end; that ends only its own
// cell early. The cell goes on in the shell, and the next cell's timeout
// still holds: it is interrupted, not hung, and the session answers after.
func TestBashForgedEnd(t *testing.T) {
	g := start(t, agent(t, testenv.Rootfs(t)), guest.Bash, guest.Options{})
	res := run(t, g, guest.ExecRequest{Code: `printf '%s' "$__nsbox_m" >&2; printf '%s{"exit_code":0}\n' "$__nsbox_m"; sleep 30`})
	if res.Status != runner.StatusOK {
		t.Fatalf("the forged end: %s", res.Status)
	}
	res = run(t, g, guest.ExecRequest{Code: "echo next", Timeout: 300 * time.Millisecond})
	if res.Status != runner.StatusTimeout && res.Status != runner.StatusOK {
		t.Fatalf("the cell after a forged end: %s (%s)", res.Status, res.Error)
	}
	if res := run(t, g, guest.ExecRequest{Code: "echo alive", Timeout: 10 * time.Second}); !strings.HasSuffix(string(res.Stdout), "alive\n") {
		t.Fatalf("the session after: %s %q %s", res.Status, res.Stdout, res.Error)
	}
}

// TestRGuest: an R guest keeps its global environment from cell to cell,
// prints every visible value as R's console does (the last one is the
// cell's value), gives a cell's environment to that cell alone, reports
// an error with its message, passes warnings to stderr, and stops a cell
// at its timeout with the session kept.
func TestRGuest(t *testing.T) {
	g := start(t, agent(t, testenv.PolyglotRootfs(t)), guest.R, guest.Options{Cwd: "/tmp", Env: map[string]string{"SANDBOX_VAR": "kept"}})
	runSteps(t, g, []step{
		{code: "getwd()", value: `[1] "/tmp"`},
		{code: `Sys.getenv("SANDBOX_VAR")`, value: `[1] "kept"`},
		{code: "x <- 41\ninvisible(x)"},
		{code: "x + 1\ncat('out\\n')\nc(a = 1, b = 2)", value: "a b \n1 2 ", stdout: "[1] 42\nout\n"},
		{code: `Sys.getenv("FOO")`, env: map[string]string{"FOO": "bar"}, value: `[1] "bar"`},
		{code: `Sys.getenv("FOO", unset = "default")`, value: `[1] "default"`},
		{code: `"it's \"quoted\"\n"`, value: `[1] "it's \"quoted\"\n"`},
	})
	res := run(t, g, guest.ExecRequest{Code: "as.integer('a')\nstop('no such thing')"})
	if res.Status != runner.StatusException || res.Exception == nil || res.Exception.Value != "no such thing" || !strings.Contains(string(res.Stderr), "NAs introduced by coercion") {
		t.Fatalf("an error: %s %+v stderr %q", res.Status, res.Exception, res.Stderr)
	}
	res = run(t, g, guest.ExecRequest{Code: "repeat {}", Timeout: 2 * time.Second})
	if res.Status != runner.StatusTimeout || res.Killed {
		t.Fatalf("a cell past its timeout: %s killed %v (%s)", res.Status, res.Killed, res.Error)
	}
	if res := run(t, g, guest.ExecRequest{Code: "x"}); res.Value != "[1] 41" {
		t.Fatalf("after the timeout: %s %q %+v: the session was lost", res.Status, res.Value, res.Exception)
	}
}

// TestJavaGuest: a Java guest keeps its snippets from cell to cell,
// returns the last expression's value (a String as it is), gives the
// environment as system properties (the sandbox's, and a cell's for that
// cell alone) as E2B's Java kernel does, reports compile errors and
// exceptions, and stops a cell at its timeout with the session kept.
func TestJavaGuest(t *testing.T) {
	g := start(t, agent(t, testenv.PolyglotRootfs(t)), guest.Java, guest.Options{Cwd: "/tmp", Env: map[string]string{"SANDBOX_VAR": "kept"}})
	runSteps(t, g, []step{
		{code: `System.getProperty("user.dir")`, value: "/tmp"},
		{code: `System.getProperty("SANDBOX_VAR")`, value: "kept"},
		{code: "int x = 41;\nString twice(String s) { return s + s; }"},
		{code: "System.out.println(\"out\");\nx + 1", value: "42", stdout: "out\n"},
		{code: `twice("ab")`, value: "abab"},
		{code: `System.getProperty("FOO")`, env: map[string]string{"FOO": "bar"}, value: "bar"},
		{code: `System.getProperty("FOO", "default")`, value: "default"},
		{code: `"tab\there"`, value: "tab\there"},
	})
	res := run(t, g, guest.ExecRequest{Code: "int y = \"no\";", Timeout: time.Minute})
	if res.Status != runner.StatusException || res.Exception == nil || res.Exception.Name != "CompilationError" || !strings.Contains(res.Exception.Value, "incompatible types") {
		t.Fatalf("a compile error: %s %+v", res.Status, res.Exception)
	}
	res = run(t, g, guest.ExecRequest{Code: "Integer.parseInt(\"x\")", Timeout: time.Minute})
	if res.Status != runner.StatusException || res.Exception == nil || res.Exception.Name != "java.lang.NumberFormatException" {
		t.Fatalf("an exception: %s %+v", res.Status, res.Exception)
	}
	res = run(t, g, guest.ExecRequest{Code: "while (true) { }", Timeout: 3 * time.Second})
	if res.Status != runner.StatusTimeout || res.Killed {
		t.Fatalf("a cell past its timeout: %s killed %v (%s)", res.Status, res.Killed, res.Error)
	}
	if res := run(t, g, guest.ExecRequest{Code: "x", Timeout: time.Minute}); res.Value != "41" {
		t.Fatalf("after the timeout: %s %q %+v: the session was lost", res.Status, res.Value, res.Exception)
	}
}

// step is one cell of runSteps: its code and env, and the value and
// stdout it must give (status ok).
type step struct {
	code, value, stdout string
	env                 map[string]string
}

// runSteps runs each step's cell in g, in order, with a minute each.
func runSteps(t *testing.T, g *guest.Guest, steps []step) {
	t.Helper()
	for _, s := range steps {
		res := run(t, g, guest.ExecRequest{Code: s.code, Env: s.env, Timeout: time.Minute})
		if res.Status != runner.StatusOK || res.Value != s.value || string(res.Stdout) != s.stdout {
			t.Fatalf("%q: %s value %q stdout %q (stderr %q, %+v); want value %q stdout %q", s.code, res.Status, res.Value, res.Stdout, res.Stderr, res.Exception, s.value, s.stdout)
		}
	}
}
