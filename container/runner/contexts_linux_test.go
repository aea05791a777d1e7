package runner

import (
	"context"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/internal/testenv"
)

// contextStep is one cell of a contexts test: its context, code and what
// it must answer.
type contextStep struct {
	ctx, code string
	status    Status
	value     string
	count     int
}

// runContextSteps runs steps on r in turn, failing at the first wrong
// answer; it returns a runner of cells in a context for more checks.
func runContextSteps(t *testing.T, r *Runner, steps []contextStep) func(ctx, code string) *Result {
	t.Helper()
	in := func(ctx, code string) *Result {
		t.Helper()
		return execReq(t, r, ExecRequest{Code: code, Timeout: time.Minute, Context: ctx})
	}
	for i, s := range steps {
		res := in(s.ctx, s.code)
		if res.Status != s.status || res.Value != s.value || res.Count != s.count {
			t.Fatalf("step %d (%q in %q): status %s value %q count %d, want %s %q %d (%+v)",
				i, s.code, s.ctx, res.Status, res.Value, res.Count, s.status, s.value, s.count, res.Exception)
		}
	}
	return in
}

func TestContexts(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.Rootfs(t))
	in := runContextSteps(t, r, []contextStep{
		{"", "x = 'main'", StatusOK, "", 1},
		{"a", "x = 'a'", StatusOK, "", 1},
		{"b", "x", StatusException, "", 1},
		{"b", "x = 'b'; __name__", StatusOK, "'__main__'", 2},
		{"a", "x", StatusOK, "'a'", 2},
		{"", "x", StatusOK, "'main'", 2},
		{"b", "x", StatusOK, "'b'", 3},
	})
	if res := in("b", "1/0"); res.Exception == nil || res.Exception.Name != "ZeroDivisionError" {
		t.Fatalf("exception in a context: %+v", res)
	}

	ctx := context.Background()
	if err := r.DropContext(ctx, "a"); err != nil {
		t.Fatalf("DropContext: %v", err)
	}
	if err := r.DropContext(ctx, "never-made"); err != nil {
		t.Fatalf("DropContext of an unknown context: %v", err)
	}
	if res := in("a", "'x' in globals()"); res.Value != "False" || res.Count != 1 {
		t.Fatalf("a dropped context is not fresh: value %q count %d", res.Value, res.Count)
	}
	if res := in("b", "x"); res.Value != "'b'" {
		t.Fatalf("dropping a dropped b: %+v", res)
	}
	if res := in("", "x"); res.Value != "'main'" || res.Count != 3 {
		t.Fatalf("default context after a drop: value %q count %d", res.Value, res.Count)
	}
	if err := r.DropContext(ctx, ""); err != nil {
		t.Fatalf("DropContext(\"\"): %v", err)
	}
	if res := in("", "'x' in globals(), __name__"); res.Value != "(False, '__main__')" || res.Count != 1 {
		t.Fatalf("the default context after its drop: value %q count %d", res.Value, res.Count)
	}
}
