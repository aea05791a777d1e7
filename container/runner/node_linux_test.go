package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/internal/testenv"
)

// nodeRootfs returns the rootfs with node the Node runner's tests use
// (testenv.NodeRootfs); it skips when there is none.
func nodeRootfs(t testing.TB) string {
	t.Helper()
	return testenv.NodeRootfs(t)
}

// startNode starts a Node runner and closes it at cleanup.
func startNode(t testing.TB, tweak ...func(*container.Spec)) *Runner {
	t.Helper()
	dir := nodeRootfs(t)
	e := newEngine(t)
	spec := container.Spec{RootfsDir: dir, Limits: container.Limits{Timeout: 10 * time.Minute, OutputBytes: 64 << 20}}
	for _, f := range tweak {
		f(&spec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := StartLang(ctx, e, spec, JavaScript)
	if err != nil {
		t.Fatalf("StartLang: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// nodeFrames are the runner's frames a Node traceback must not show.
var nodeFrames = []string{"nsbox-runner", "node:vm"}

func TestNodeCells(t *testing.T) {
	r := startNode(t)
	runCells(t, r, nodeFrames, []cell{
		{name: "let", code: "let x = 41", status: StatusOK},
		{name: "let persists", code: "x + 1", status: StatusOK, value: "42"},
		{name: "const function class", code: "const k = 2\nfunction dbl(n) { return n * k }\nclass P { constructor(v) { this.v = v } }", status: StatusOK},
		{name: "they persist", code: "new P(dbl(x)).v", status: StatusOK, value: "82"},
		{name: "var", code: "var v = 'hi'", status: StatusOK},
		{name: "string quoted", code: "v", status: StatusOK, value: "'hi'"},
		{name: "one plus one", code: "1+1", status: StatusOK, value: "2"},
		{name: "object inspected", code: "({a: 1, b: [1, 2], c: 'x'})", status: StatusOK, value: "{ a: 1, b: [ 1, 2 ], c: 'x' }"},
		{name: "object literal as the REPL", code: "{a: 1}", status: StatusOK, value: "{ a: 1 }"},
		{name: "undefined is no value", code: "undefined", status: StatusOK},
		{name: "null", code: "null", status: StatusOK, value: "null"},
		{name: "map", code: "new Map([[1, 'a']])", status: StatusOK, value: "Map(1) { 1 => 'a' }"},
		{name: "console", code: "console.log('out', 1)\nconsole.error('err')\n7", status: StatusOK, value: "7", stdout: "out 1\n", stderr: "err\n"},
		{name: "process.stdout", code: "process.stdout.write('a')", status: StatusOK, value: "true", stdout: "a"},
		{name: "require fs", code: "const fs = require('fs')\nfs.writeFileSync('m.js', 'module.exports = 6')\nfs.existsSync('/workspace/m.js')", status: StatusOK, value: "true"},
		{name: "require relative", code: "require('./m.js') * 7", status: StatusOK, value: "42"},
		{name: "require acorn", code: "require('acorn').parse('1', {ecmaVersion: 2020}).type", status: StatusOK, value: "'Program'"},
		{name: "import()", code: "const { parse } = await import('acorn')\nconst path = await import('node:path');\n[typeof parse, path.basename('/a/b.js')]", status: StatusOK, value: "[ 'function', 'b.js' ]"},
		{name: "globals", code: "[typeof Buffer, typeof URL, typeof TextEncoder, typeof setTimeout, typeof process.env, typeof global]", status: StatusOK,
			value: "[ 'function', 'function', 'function', 'function', 'object', 'object' ]"},
		{name: "last value is _", code: "_", status: StatusOK, value: "[ 'function', 'function', 'function', 'function', 'object', 'object' ]"},
		{name: "runner names hidden", code: "[typeof contexts, typeof send, typeof handle]", status: StatusOK, value: "[ 'undefined', 'undefined', 'undefined' ]"},
		{name: "thrown", code: "const a = 1\nnull.f", status: StatusException, exc: "TypeError", excValue: "Cannot read properties of null (reading 'f')", tb: "<cell 22>:2:"},
		{name: "throw a string", code: "throw 'no'", status: StatusException, exc: "Uncaught", excValue: "'no'"},
		{name: "syntax error", code: "let y = 1\nlet z = ;", status: StatusException, exc: "SyntaxError", tb: "<cell 24>:2"},
		{name: "exit(0) is ok", code: "process.exit(0)", status: StatusOK},
		{name: "exit(3) raises", code: "process.exit(3)", status: StatusException, exc: "ProcessExit", excValue: "process.exit(3)"},
		{name: "still alive", code: "x", status: StatusOK, value: "41"},
	})
}

func TestNodeTopLevelAwait(t *testing.T) {
	r := startNode(t)
	runCells(t, r, nodeFrames, []cell{
		{name: "await a value", code: "const r = await Promise.resolve(5); r", status: StatusOK, value: "5"},
		{name: "visible after", code: "r * 2", status: StatusOK, value: "10"},
		{name: "declarations persist", code: "let [a, {b}] = await Promise.resolve([1, {b: 2}])\nfunction f() { return a + b }\nclass C {}\nawait null", status: StatusOK, value: "null"},
		{name: "they persist", code: "[f(), typeof C]", status: StatusOK, value: "[ 3, 'function' ]"},
		{name: "timers", code: "await new Promise(res => setTimeout(() => res('late'), 50))", status: StatusOK, value: "'late'"},
		{name: "no value", code: "await 1; let q = 2", status: StatusOK},
		{name: "rejected", code: "async function bad() { throw new RangeError('nope') }\n\nawait bad()", status: StatusException, exc: "RangeError", excValue: "nope", tb: "<cell 7>:1:"},
		{name: "await in a function is no TLA", code: "async function g() { return await 3 }\ng()", status: StatusOK, value: "Promise { <pending> }"},
		{name: "for await", code: "let s = 0\nfor await (const v of [1, 2]) s += v\ns", status: StatusOK, value: "3"},
	})
}

func TestNodeErrorsLaterAreReported(t *testing.T) {
	r := startNode(t)
	// The first cell's timers throw once the second cell is running:
	// output between cells is dropped (sink), so timers on a clock would
	// race the second request on a busy machine. They wait on a gate the
	// second cell opens, then fire in order; the second cell answers after
	// the last of them (timers of one delay run in the order they were set).
	first := exec(t, r, "let open; const gate = new Promise(r => open = r)\n"+
		"const fired = gate.then(() => new Promise(done => { setTimeout(() => { throw new Error('later') }, 10); setTimeout(() => process.exit(4), 10); setTimeout(done, 10) }))\n"+
		"Promise.reject(new RangeError('nobody')); 0")
	res := exec(t, r, "open(); await fired; 1")
	if res.Status != StatusOK || res.Value != "1" {
		t.Fatalf("the runner did not survive: %+v", res)
	}
	// The rejection is reported when node checks for unhandled ones, at
	// the end of the tick: a cell that settled a promise answers after
	// that, so the report is the first cell's.
	if !strings.Contains(string(first.Stderr), "Unhandled promise rejection: RangeError: nobody") {
		t.Errorf("the first cell's stderr lacks its unhandled rejection:\n%s", first.Stderr)
	}
	stderr := string(first.Stderr) + string(res.Stderr)
	for _, want := range []string{"Uncaught Error: later", "Unhandled promise rejection: RangeError: nobody", "Uncaught ProcessExit: process.exit(4)"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

func TestNodeTracebackPointsAtUserLine(t *testing.T) {
	r := startNode(t)
	exec(t, r, "function f(d) {\n  if (d === 0) throw new Error('zero')\n  return 1 / d\n}")
	res := exec(t, r, "const y = 2\nf(0)")
	if res.Status != StatusException || res.Exception.Name != "Error" || res.Exception.Value != "zero" {
		t.Fatalf("got %+v %+v", res, res.Exception)
	}
	tb := res.Exception.Traceback
	for _, want := range []string{"Error: zero", "at f (<cell 1>:2:", "at <cell 2>:2:1"} {
		if !strings.Contains(tb, want) {
			t.Errorf("traceback lacks %q:\n%s", want, tb)
		}
	}
	if strings.Contains(tb, "nsbox-runner") || strings.Contains(tb, "node:") {
		t.Errorf("traceback shows runner or node frames:\n%s", tb)
	}
	if got := exec(t, r, "y"); got.Value != "2" {
		t.Fatalf("after the exception y = %q (%+v)", got.Value, got)
	}
}

func TestNodeStreaming(t *testing.T) {
	r := startNode(t)
	// Each line carries the time it was printed (the sandbox's wall clock
	// is the host's) and must arrive before the next is printed: output
	// held back until the end arrives after all three. A busy machine only
	// fails it by holding the reader back for the whole 200 ms between two
	// prints.
	var mu sync.Mutex
	var arrived []time.Time
	res := execReq(t, r, ExecRequest{
		Code:    "for (let i = 0; i < 3; i++) { console.log(i, Date.now()); await new Promise(r => setTimeout(r, 200)) }",
		Timeout: time.Minute,
		OnStdout: func(b []byte) {
			mu.Lock()
			defer mu.Unlock()
			now := time.Now()
			for range strings.Count(string(b), "\n") {
				arrived = append(arrived, now)
			}
		},
	})
	lines := strings.Split(strings.TrimSuffix(string(res.Stdout), "\n"), "\n")
	if res.Status != StatusOK || len(lines) != 3 {
		t.Fatalf("got %+v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(arrived) != 3 {
		t.Fatalf("%d lines streamed, want 3", len(arrived))
	}
	for i := 0; i+1 < len(lines); i++ {
		var n int
		var ms int64
		if _, err := fmt.Sscanf(lines[i+1], "%d %d", &n, &ms); err != nil || n != i+1 {
			t.Fatalf("line %d is %q, want %d and a time", i+1, lines[i+1], i+1)
		}
		if next := time.UnixMilli(ms); !arrived[i].Before(next) {
			t.Errorf("line %d came %v after line %d was printed (the output was held back)", i, arrived[i].Sub(next), i+1)
		}
	}
}

func TestNodeInterrupts(t *testing.T) {
	r := startNode(t)
	exec(t, r, "let kept = 7")
	tests := []struct{ name, code string }{
		{"sync loop", "console.log('before')\nwhile (true) {}"},
		{"never resolves", "console.log('before')\nawait new Promise(() => {})"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Now()
			res := execPastPrint(t, r, ExecRequest{Code: tc.code, Timeout: 2 * time.Second}, nil)
			if res.Status != StatusTimeout || res.Killed || res.Exception == nil || res.Exception.Name != "Interrupted" {
				t.Fatalf("got %+v %+v", res, res.Exception)
			}
			if string(res.Stdout) != "before\n" {
				t.Errorf("stdout %q", res.Stdout)
			}
			t.Logf("interrupted after %v", time.Since(t0))
			if got := exec(t, r, "kept"); got.Value != "7" {
				t.Fatalf("after the timeout kept = %q (%+v)", got.Value, got)
			}
		})
	}
}

// A one-shot run's cell (KillOnTimeout) runs without breakOnSigint: its
// timeout or cancel kills the sandbox, synchronous or not, and the output
// it printed before is kept.
func TestNodeKillOnTimeout(t *testing.T) {
	tests := []struct {
		name, code string
		cancel     bool
		want       Status
	}{
		{"sync loop", "console.log('before')\nwhile (true) {}", false, StatusTimeout},
		{"never resolves", "console.log('before')\nawait new Promise(() => {})", false, StatusTimeout},
		{"cancelled sync loop", "console.log('before')\nwhile (true) {}", true, StatusCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r *Runner
			start := func() *Runner {
				r = startNode(t)
				if res := execReq(t, r, ExecRequest{Code: "1+1", KillOnTimeout: true, Timeout: time.Minute}); res.Status != StatusOK || res.Value != "2" {
					t.Fatalf("a cell that ends in time: %+v", res)
				}
				return r
			}
			// The timeout must come after the cell printed (the top-level
			// await's rewrite can take seconds on a busy machine): a try
			// whose timeout came first runs again on a new runner with a
			// longer one. A cancel waits for the print itself.
			req := ExecRequest{Code: tc.code, KillOnTimeout: true, Timeout: 2 * time.Second}
			var res *Result
			var err error
			if tc.cancel {
				start()
				req.Timeout = time.Minute
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				req.OnStdout = func([]byte) { cancel() }
				res, err = r.Exec(ctx, req)
			} else {
				res = execPastPrint(t, nil, req, start)
			}
			if err != nil || res.Status != tc.want || !res.Killed || res.Exception != nil {
				t.Fatalf("got %+v, %v", res, err)
			}
			if string(res.Stdout) != "before\n" {
				t.Errorf("stdout %q", res.Stdout)
			}
			if st, _ := r.Dead(); st != tc.want {
				t.Errorf("Dead() = %q, want %q", st, tc.want)
			}
		})
	}
}

func TestNodeOutputFlood(t *testing.T) {
	r := startNode(t)
	res := execReq(t, r, ExecRequest{Code: "while (true) console.log('x'.repeat(100))", Timeout: time.Minute, OutputBytes: 256 << 10})
	if res.Status != StatusOutputLimit || res.Killed || !res.StdoutTruncated || len(res.Stdout) != 256<<10 {
		t.Fatalf("status %q killed %v truncated %v stdout %d bytes, wall %v", res.Status, res.Killed, res.StdoutTruncated, len(res.Stdout), res.Wall)
	}
	t.Logf("a flood stopped in %v (%d bytes produced)", res.Wall, res.StdoutBytes)
	if got := exec(t, r, "1+1"); got.Value != "2" {
		t.Fatalf("after the flood: %+v", got)
	}
}

func TestNodeContexts(t *testing.T) {
	r := startNode(t)
	in := runContextSteps(t, r, []contextStep{
		{"", "var x = 'main'", StatusOK, "", 1},
		{"a", "var x = 'a'", StatusOK, "", 1},
		{"b", "x", StatusException, "", 1},
		{"b", "var x = 'b'; x", StatusOK, "'b'", 2},
		{"a", "x", StatusOK, "'a'", 2},
		{"", "x", StatusOK, "'main'", 2},
	})
	if res := in("b", "x"); res.Exception != nil || res.Value != "'b'" {
		t.Fatalf("b: %+v", res)
	}
	ctx := context.Background()
	if err := r.DropContext(ctx, "a"); err != nil {
		t.Fatalf("DropContext: %v", err)
	}
	if res := in("a", "typeof x"); res.Value != "'undefined'" || res.Count != 1 {
		t.Fatalf("a dropped context is not fresh: value %q count %d", res.Value, res.Count)
	}
	if err := r.DropContext(ctx, ""); err != nil {
		t.Fatalf("DropContext(\"\"): %v", err)
	}
	if res := in("", "typeof x"); res.Value != "'undefined'" || res.Count != 1 {
		t.Fatalf("the default context after its drop: value %q count %d", res.Value, res.Count)
	}
	if res := in("b", "x"); res.Value != "'b'" {
		t.Fatalf("b after the drops: %+v", res)
	}
}

func TestNodeEnvPerCell(t *testing.T) {
	r := startNode(t)
	res := execReq(t, r, ExecRequest{Code: "process.env.NSBOX_X + ' ' + require('child_process').execSync('echo $NSBOX_X').toString().trim()",
		Timeout: time.Minute, Env: map[string]string{"NSBOX_X": "set"}})
	if res.Value != "'set set'" {
		t.Fatalf("with env: %+v %+v", res, res.Exception)
	}
	if res := exec(t, r, "process.env.NSBOX_X"); res.Status != StatusOK || res.Value != "" {
		t.Fatalf("env outlived its cell: %+v", res)
	}
}

func TestNodeTypeScript(t *testing.T) {
	r := startNode(t)
	runCells(t, r, nodeFrames, []cell{
		{name: "annotations stripped", ts: true, code: "interface P { n: number }\nconst p: P = { n: 2 }\nfunction sq(x: number): number { return x * x }\nsq(p.n)", status: StatusOK, value: "4"},
		{name: "a type error is no error", ts: true, code: "const s: string = 5 as any as number\ns", status: StatusOK, value: "5"},
		{name: "top-level await", ts: true, code: "const w: number = await Promise.resolve(6)\nw", status: StatusOK, value: "6"},
		{name: "syntax error names its line", ts: true, code: "const a = 1\n\nlet b: = 2", status: StatusException, exc: "SyntaxError", tb: "<cell 4>:3:8"},
		{name: "lines kept", ts: true, code: "type T = {\n  a: string\n}\n// a comment\n\nconst t: T = { a: 'x' }\nthrow new Error(t.a)", status: StatusException, exc: "Error", excValue: "x", tb: "<cell 5>:7:"},
		{name: "javascript after", code: "sq(3) + w", status: StatusOK, value: "15"},
	})
}

func TestNodeAgentUnsupported(t *testing.T) {
	r := startNode(t)
	if _, err := r.StartAgent(context.Background()); err == nil || !strings.Contains(err.Error(), "not supported in a Node session") {
		t.Fatalf("StartAgent: %v", err)
	}
	// The runner itself answers an agent request with the same error (and
	// drops the byte that carries the agent's socket).
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	rep, err := r.control(context.Background(), agentRequest{Agent: true}, []*os.File{pw})
	if err != nil || !strings.Contains(rep.Error, "not supported in a Node session") {
		t.Fatalf("agent request: %+v %v", rep, err)
	}
	if res := exec(t, r, "1+1"); res.Value != "2" {
		t.Fatalf("after the agent request: %+v", res)
	}
}

func TestNodePreimport(t *testing.T) {
	r := startNode(t)
	skipped, err := r.Preimport(context.Background(), []string{"acorn", "no-such-module"}, time.Minute)
	if err != nil || len(skipped) != 1 || skipped[0] != "no-such-module" {
		t.Fatalf("Preimport: %v %v", skipped, err)
	}
	if res := exec(t, r, "1+1"); res.Value != "2" || res.Count != 1 {
		t.Fatalf("first cell after setup: %+v", res)
	}
}

// BenchmarkNodeStart measures a runner's start, Node's next to Python's
// on the same rootfs: the sandbox, the interpreter's start-up and the
// runner's ready frame.
func BenchmarkNodeStart(b *testing.B) {
	dir := nodeRootfs(b)
	e := newEngine(b)
	spec := container.Spec{RootfsDir: dir, Limits: container.Limits{Timeout: time.Minute, OutputBytes: 64 << 20}}
	for _, lang := range []Language{JavaScript, Python} {
		b.Run(string(lang), func(b *testing.B) {
			for b.Loop() {
				r, err := StartLang(context.Background(), e, spec, lang)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				r.Close()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkNodeExec measures the round trip of a cell: `1+1` in
// JavaScript, in TypeScript (esbuild's run included) and with a top-level
// await (acorn's parse and the rewrite included).
func BenchmarkNodeExec(b *testing.B) {
	r := startNode(b)
	for _, c := range []struct {
		name, code string
		ts         bool
	}{{"js", "1+1", false}, {"ts", "1+1", true}, {"await", "await 1+1", false}} {
		b.Run(c.name, func(b *testing.B) {
			req := ExecRequest{Code: c.code, Transform: tsIf(c.ts), Timeout: time.Minute}
			execReq(b, r, req)
			for b.Loop() {
				if res := execReq(b, r, req); res.Status != StatusOK || res.Value != "2" {
					b.Fatalf("%+v", res)
				}
			}
		})
	}
}

// A synchronous loop that runs after a cell's first await is outside the
// vm call that breakOnSigint guards, and blocks the SIGINT listener: the
// sandbox is killed InterruptGrace later (docs/ARCHITECTURE.md, "Node
// runner").
func TestNodeLoopAfterAwaitIsKilled(t *testing.T) {
	r := startNode(t)
	res := execReq(t, r, ExecRequest{Code: "await null\nwhile (true) {}", Timeout: 200 * time.Millisecond})
	if res.Status != StatusTimeout || !res.Killed {
		t.Fatalf("got %+v", res)
	}
	if _, err := r.Exec(context.Background(), ExecRequest{Code: "1"}); err == nil {
		t.Fatal("Exec on a killed runner succeeded")
	}
}

func TestTypeScriptNeedsNode(t *testing.T) {
	r := startRunner(t, newEngine(t), nodeRootfs(t))
	if _, err := r.Exec(context.Background(), ExecRequest{Code: "1", Transform: StripTypes}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("a TypeScript cell in Python: %v, want ErrUnsupported", err)
	}
	if res := exec(t, r, "1+1"); res.Value != "2" || r.Language() != Python {
		t.Fatalf("after it: %+v (%s)", res, r.Language())
	}
}

// tsIf is StripTypes for a TypeScript cell.
func tsIf(ts bool) Transform {
	if ts {
		return StripTypes
	}
	return ""
}
