package runner

import (
	"context"
	"os"
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

func execReq(t testing.TB, r *Runner, req ExecRequest) *Result {
	t.Helper()
	res, err := r.Exec(context.Background(), req)
	if err != nil {
		t.Fatalf("Exec(%q): %v", req.Code, err)
	}
	return res
}
