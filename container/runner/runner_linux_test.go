package runner

import (
	"bytes"
	"context"
	"image/png"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/internal/testenv"
)

func TestCells(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.Rootfs(t))
	runCells(t, r, []string{"nsbox-runner"}, []cell{
		{name: "assign", code: "x = 41", status: StatusOK},
		{name: "state persists", code: "x + 1", status: StatusOK, value: "42"},
		{name: "print and value", code: "print('hi')\nimport sys\nprint('err', file=sys.stderr)\n'v'", status: StatusOK, value: "'v'", stdout: "hi\n", stderr: "err\n"},
		{name: "no newline", code: "print('a', end='')", status: StatusOK, stdout: "a"},
		{name: "None is no value", code: "None", status: StatusOK},
		{name: "imports persist", code: "import json", status: StatusOK},
		{name: "uses import", code: "json.dumps([1])", status: StatusOK, value: "'[1]'"},
		{name: "zero division", code: "a = 1\nb = 0\nc = a / b", status: StatusException, exc: "ZeroDivisionError", excValue: "division by zero", tb: "line 3"},
		{name: "syntax error", code: "def f(:", status: StatusException, exc: "SyntaxError"},
		{name: "subprocess output", code: "import subprocess\nsubprocess.run(['echo', 'from child'])", status: StatusOK, stdout: "from child\n", value: "CompletedProcess(args=['echo', 'from child'], returncode=0)"},
		{name: "runner names hidden", code: "'_send' in globals() or '_run' in globals()", status: StatusOK, value: "False"},
		{name: "exit(0) is ok", code: "import sys\nsys.exit(0)", status: StatusOK},
		{name: "exit(3) raises", code: "import sys\nsys.exit(3)", status: StatusException, exc: "SystemExit"},
		{name: "still alive", code: "x", status: StatusOK, value: "41"},
	})
}

// TestShellEscapes: IPython's `!cmd` and `x = !cmd` lines in a cell that
// is not Python otherwise; a multi-line string keeps its `!` lines, and a
// cell that still does not parse runs nothing and reports its own error.
func TestShellEscapes(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.Rootfs(t))
	runCells(t, r, []string{"nsbox-runner", "__nsbox_shell__"}, []cell{
		{name: "a command's output", code: "print('py')\n!echo sh\n!echo err >&2", status: StatusOK, stdout: "py\nsh\n", stderr: "err\n"},
		{name: "its directory", code: "import os\nos.chdir('/tmp')\n!pwd", status: StatusOK, stdout: "/tmp\n"},
		{name: "captured, with {expr}", code: "v = 6\nout = !echo {v + 1} {nope}\nout", status: StatusOK, value: "['7 {nope}']"},
		{name: "indented, exit code", code: "if v:\n    !exit 3\n_exit_code", status: StatusOK, value: "3"},
		{name: "a string keeps its lines", code: "s = '''\n!x\n'''\n!true\ns", status: StatusOK, value: `'\n!x\n'`},
		{name: "still a syntax error", code: "!echo ran\ndef f(:", status: StatusException, exc: "SyntaxError"},
		{name: "!= is Python's", code: "v != 6", status: StatusOK, value: "False"},
		{name: "%cd", code: "%cd /tmp\nimport os\nos.getcwd()", status: StatusOK, stdout: "/tmp\n", value: "'/tmp'"},
		{name: "%pwd", code: "here = %pwd\nhere", status: StatusOK, value: "'/tmp'"},
		{name: "%env sets", code: "%env NSBOX_T=it is\nimport os\nos.environ['NSBOX_T']", status: StatusOK, stdout: "env: NSBOX_T=it is\n", value: "'it is'"},
		{name: "%env gets", code: "%env NSBOX_T", status: StatusOK, value: "'it is'"},
	})
	// %pip is this interpreter's pip (the test rootfs may have none: then
	// python3 -m pip says so).
	res := exec(t, r, "%pip --version\n_exit_code")
	if out := string(res.Stdout) + string(res.Stderr); !strings.Contains(out, "pip") || res.Status != StatusOK {
		t.Fatalf("%%pip --version: %s %q %q", res.Status, out, res.Value)
	}
}

func TestTracebackPointsAtUserLine(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.Rootfs(t))
	exec(t, r, "def f(d):\n    return 1 / d")
	res := exec(t, r, "y = 2\nf(0)")
	if res.Status != StatusException || res.Exception.Name != "ZeroDivisionError" {
		t.Fatalf("got %+v", res)
	}
	tb := res.Exception.Traceback
	for _, want := range []string{`File "<cell 2>", line 2`, "f(0)", `File "<cell 1>", line 2, in f`, "return 1 / d", "ZeroDivisionError: division by zero"} {
		if !strings.Contains(tb, want) {
			t.Errorf("traceback lacks %q:\n%s", want, tb)
		}
	}
	if res.Count != 2 {
		t.Errorf("count %d, want 2", res.Count)
	}
}

func TestTimeoutInterrupts(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.Rootfs(t))
	exec(t, r, "x = 7")
	res := execPastPrint(t, r, ExecRequest{Code: "print('before', flush=True)\nwhile True: pass", Timeout: 2 * time.Second}, nil)
	if res.Status != StatusTimeout || res.Killed || res.Exception == nil || res.Exception.Name != "KeyboardInterrupt" {
		t.Fatalf("got %+v", res)
	}
	if string(res.Stdout) != "before\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
	if tb := res.Exception.Traceback; strings.Contains(tb, "nsbox-runner") || !strings.Contains(tb, "<cell 2>") {
		t.Errorf("KeyboardInterrupt traceback:\n%s", tb)
	}
	if got := exec(t, r, "x"); got.Value != "7" {
		t.Fatalf("after the timeout x = %q (%+v)", got.Value, got)
	}
}

// A cell whose timeout fires at once, right after the runner said ready
// (a busy machine can hold the runner there as long as a short timeout),
// is a timeout: the SIGINT must not reach the runner's own code, which
// crashed the interpreter ("the interpreter exited or crashed") when it
// came before the runner ignored SIGINT between cells.
func TestTimeoutAtOnceIsATimeout(t *testing.T) {
	for i := range 3 {
		r := startRunner(t, newEngine(t), testenv.Rootfs(t))
		res := execReq(t, r, ExecRequest{Code: "while True: pass", Timeout: time.Microsecond})
		if res.Status != StatusTimeout {
			t.Fatalf("try %d: a timeout at once: %s (%s)\n%s", i, res.Status, res.Error, res.Stderr)
		}
	}
}

func TestTimeoutKillsStuckCell(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.Rootfs(t))
	// The cell ignores SIGINT (like a long C call): the sandbox must be killed.
	res := execReq(t, r, ExecRequest{Code: "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass", Timeout: 200 * time.Millisecond})
	if res.Status != StatusTimeout || !res.Killed {
		t.Fatalf("got %+v %+v", res, res.Exception)
	}
	if _, err := r.Exec(context.Background(), ExecRequest{Code: "1"}); err == nil {
		t.Fatal("Exec on a killed runner succeeded")
	}
}

func TestOOMEndsRunner(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.Rootfs(t), func(s *container.Spec) { s.Limits.MemoryBytes = 64 << 20 })
	res := exec(t, r, "b = bytearray(1 << 30)")
	if res.Status != StatusOOM {
		t.Fatalf("status %q, want oom (%+v)", res.Status, res)
	}
	if st, _ := r.Dead(); st != StatusOOM {
		t.Fatalf("Dead() = %q", st)
	}
}

func TestCrashEndsRunner(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.Rootfs(t))
	res := exec(t, r, "import os\nos._exit(5)")
	if res.Status != StatusCrashed {
		t.Fatalf("status %q, want crashed", res.Status)
	}
}

func TestStreaming(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.Rootfs(t))
	var mu sync.Mutex
	var out bytes.Buffer
	res := execReq(t, r, ExecRequest{
		Code:        "for i in range(3): print(i, flush=True)\nprint('x' * 5000)",
		OutputBytes: 10,
		OnStdout:    func(b []byte) { mu.Lock(); out.Write(b); mu.Unlock() },
	})
	want := "0\n1\n2\n" + strings.Repeat("x", 5000) + "\n"
	// The callback gets what the Result keeps: nothing past the cap.
	if out.String() != want[:10] {
		t.Errorf("streamed %q, want %q", out.String(), want[:10])
	}
	if res.Status != StatusOutputLimit || string(res.Stdout) != want[:10] || !res.StdoutTruncated || res.StdoutBytes < 10 {
		t.Errorf("status %q stdout %q truncated %v bytes %d", res.Status, res.Stdout, res.StdoutTruncated, res.StdoutBytes)
	}
}

func TestNoFiguresWithoutMatplotlib(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.Rootfs(t))
	execFigures(t, r, "try:\n    import matplotlib\nexcept ImportError:\n    pass\n1", 0)
}

func TestFigures(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.DataSciRootfs(t))
	tests := []struct {
		name, code string
		n          int
	}{
		{"one open", "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])", 1},
		{"two figures", "plt.figure(); plt.plot([1, 2])\nplt.figure(); plt.bar([1], [2])", 2},
		{"show does not block", "plt.plot([3, 1]); plt.show()", 1},
		{"shown then closed", "plt.plot([3, 1]); plt.show(); plt.close('all')", 1},
		{"closed after capture", "len(plt.get_fignums())", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, f := range execFigures(t, r, tc.code, tc.n).Figures {
				if f.MIME != "image/png" {
					t.Errorf("mime %q", f.MIME)
				}
				img, err := png.Decode(bytes.NewReader(f.Data))
				if err != nil {
					t.Fatalf("figure is not a PNG: %v", err)
				}
				if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
					t.Errorf("figure is %v", b)
				}
			}
		})
	}
}

func TestPandasPersists(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.DataSciRootfs(t))
	exec(t, r, "import pandas as pd")
	res := exec(t, r, "df = pd.DataFrame({'a': [1, 2, 3]})\nint(df.a.sum())")
	if res.Status != StatusOK || res.Value != "6" {
		t.Fatalf("got %+v", res)
	}
}

// BenchmarkExec measures the round trip of a trivial cell.
func BenchmarkExec(b *testing.B) {
	r := startRunner(b, newEngine(b), testenv.Rootfs(b))
	exec(b, r, "x = 0")
	b.ResetTimer()
	for b.Loop() {
		if res := exec(b, r, "x += 1"); res.Status != StatusOK {
			b.Fatalf("%+v", res)
		}
	}
}

// The runner's source, the argument every Python runner is started with,
// is a held constant of the zygote's prelude: a zygote's child takes the
// prelude's copy instead of 26 KB in every run.
func TestZygoteHeldIsTheRunnersSource(t *testing.T) {
	src := Argv()[4]
	name, ok := ZygoteHeld()[src]
	if !ok {
		t.Fatal("the runner's source is not held")
	}
	if !strings.HasPrefix(ZygotePrelude(), name+" = ") {
		t.Errorf("the prelude does not define %s first: %.60q", name, ZygotePrelude())
	}
}

// TestIndentedCell: a cell written indented (inside a JS template literal)
// runs as IPython runs it, dedented, and its traceback's line numbers are
// the cell's own.
func TestIndentedCell(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.Rootfs(t))
	res := exec(t, r, "\n        x = 1\n        if x:\n            x += 1\n        x\n        ")
	if res.Status != StatusOK || res.Value != "2" {
		t.Fatalf("indented cell: %s %q %+v", res.Status, res.Value, res.Exception)
	}
	res = exec(t, r, "\n\n    y = 0\n    1 / y\n")
	if res.Exception == nil || res.Exception.Name != "ZeroDivisionError" || !strings.Contains(res.Exception.Traceback, "line 4") {
		t.Fatalf("indented cell's error: %+v", res.Exception)
	}
}

// BenchmarkExecValue measures a cell that ends with a value, with pandas
// and matplotlib loaded: the path that looks for a value's rich forms
// and for figures.
func BenchmarkExecValue(b *testing.B) {
	r := startRunner(b, newEngine(b), testenv.DataSciRootfs(b))
	exec(b, r, "import pandas, matplotlib.pyplot, PIL.Image\nx = 0")
	b.ResetTimer()
	for b.Loop() {
		if res := exec(b, r, "x += 1\nx"); res.Status != StatusOK || res.Value == "" {
			b.Fatalf("%+v", res)
		}
	}
}
