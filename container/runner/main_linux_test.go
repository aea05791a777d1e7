package runner

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/internal/testenv"
)

func TestMain(m *testing.M) {
	// Sandboxes re-execute this test binary as their init.
	container.MaybeInit()
	os.Exit(m.Run())
}

func newEngine(t testing.TB) *container.Engine {
	t.Helper()
	testenv.RequireRoot(t)
	name := testenv.CgroupName()
	e, err := container.New(container.Config{RunDir: t.TempDir(), CgroupName: name})
	if err != nil {
		t.Fatalf("container.New: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// startRunner starts a runner on rootfs dir and closes it at cleanup.
func startRunner(t testing.TB, e *container.Engine, dir string, tweak ...func(*container.Spec)) *Runner {
	t.Helper()
	spec := container.Spec{RootfsDir: dir, Limits: container.Limits{Timeout: 10 * time.Minute, OutputBytes: 64 << 20}}
	for _, f := range tweak {
		f(&spec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := Start(ctx, e, spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func exec(t testing.TB, r *Runner, code string) *Result {
	t.Helper()
	return execReq(t, r, ExecRequest{Code: code, Timeout: time.Minute})
}

// execFigures runs code, which must end well and show exactly n figures.
func execFigures(t testing.TB, r *Runner, code string, n int) *Result {
	t.Helper()
	res := exec(t, r, code)
	if res.Status != StatusOK || len(res.Figures) != n {
		t.Fatalf("status %q, %d figures, want %d; exception %+v stderr %s", res.Status, len(res.Figures), n, res.Exception, res.Stderr)
	}
	return res
}

func execReq(t testing.TB, r *Runner, req ExecRequest) *Result {
	t.Helper()
	res, err := r.Exec(context.Background(), req)
	if err != nil {
		t.Fatalf("Exec(%q): %v", req.Code, err)
	}
	return res
}

// execPastPrint runs req, a cell that prints before it loops or waits,
// and returns its result once its timeout came after the print. A busy
// machine can take longer than req.Timeout to start the cell and print:
// then the result has no output, and the cell runs again with its timeout
// doubled, up to a minute. The caller asserts on the result as it would
// on one try; run (nil: r) gives the runner for each try.
func execPastPrint(t testing.TB, r *Runner, req ExecRequest, run func() *Runner) *Result {
	t.Helper()
	for {
		if run != nil {
			r = run()
		}
		res := execReq(t, r, req)
		if len(res.Stdout) > 0 || res.Status != StatusTimeout || req.Timeout >= time.Minute {
			return res
		}
		t.Logf("the timeout (%s) came before the cell printed: again with %s", req.Timeout, 2*req.Timeout)
		req.Timeout *= 2
	}
}

// cell is one cell of a table test and what it must answer (ts: it is
// TypeScript, for a Node runner).
type cell struct {
	name, code        string
	ts                bool
	status            Status
	value             string
	stdout, stderr    string
	exc, excValue, tb string
}

// runCells runs each cell in r, in order, as a subtest; a traceback must
// show none of frames (the runner's own).
func runCells(t *testing.T, r *Runner, frames []string, tests []cell) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := execReq(t, r, ExecRequest{Code: tc.code, Transform: tsIf(tc.ts), Timeout: time.Minute})
			if res.Status != tc.status || res.Value != tc.value || string(res.Stdout) != tc.stdout || string(res.Stderr) != tc.stderr {
				t.Fatalf("got status %q value %q stdout %q stderr %q exception %+v; want %q %q %q %q",
					res.Status, res.Value, res.Stdout, res.Stderr, res.Exception, tc.status, tc.value, tc.stdout, tc.stderr)
			}
			if tc.exc == "" {
				if res.Exception != nil {
					t.Fatalf("unexpected exception %+v", res.Exception)
				}
				return
			}
			e := res.Exception
			if e == nil || e.Name != tc.exc || (tc.excValue != "" && e.Value != tc.excValue) || !strings.Contains(e.Traceback, tc.tb) {
				t.Fatalf("exception %+v, want %s %q with %q in the traceback", e, tc.exc, tc.excValue, tc.tb)
			}
			for _, f := range frames {
				if strings.Contains(e.Traceback, f) {
					t.Errorf("traceback shows runner frames (%s):\n%s", f, e.Traceback)
				}
			}
		})
	}
}
