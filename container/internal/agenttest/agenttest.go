// Package agenttest starts what the process agent's test suites run
// against: a Python runner in a sandbox of its own, and its agent.
package agenttest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/internal/testenv"
	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/container/runner"
)

// Main is the TestMain of a suite that starts sandboxes: they re-execute
// the test binary as their init.
func Main(m *testing.M) {
	container.MaybeInit()
	os.Exit(m.Run())
}

// Start starts a Python runner on rootfs, in a sandbox of a fresh
// engine, and its process agent; all end at cleanup. It skips unless
// root; the suite's TestMain is Main.
func Start(t testing.TB, rootfs string) (*runner.Runner, *procs.Agent) {
	t.Helper()
	testenv.RequireRoot(t)
	e, err := container.New(container.Config{RunDir: t.TempDir(), CgroupName: testenv.CgroupName()})
	if err != nil {
		t.Fatalf("container.New: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec := container.Spec{RootfsDir: rootfs, Limits: container.Limits{Timeout: 10 * time.Minute, OutputBytes: 64 << 20}}
	r, err := runner.Start(ctx, e, spec)
	if err != nil {
		t.Fatalf("runner.Start: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	a, err := r.StartAgent(ctx)
	if err != nil {
		t.Fatalf("StartAgent: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return r, a
}
