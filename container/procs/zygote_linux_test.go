package procs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/internal/testenv"
	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/container/runner"
	"github.com/nsbox/nsbox/container/zygote"
)

// A zygote's child gets its agent the same way: its control socket is the
// non-blocking run socket with SO_PASSCRED on the host's end.
func TestAgentInZygoteChild(t *testing.T) {
	r, a := zygoteAgent(t)
	o := collect(t, start(t, a, procs.Config{Cmd: "echo", Args: []string{"from", "a child"}}))
	if o.stdout.String() != "from a child\n" || o.end == nil || o.end.ExitCode != 0 {
		t.Fatalf("stdout %q end %+v err %v", o.stdout.String(), o.end, o.err)
	}
	// Cells still work after the agent's start.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := r.Exec(ctx, runner.ExecRequest{Code: "6 * 7", Timeout: time.Minute})
	if err != nil || res.Value != "42" {
		t.Fatalf("a cell after StartAgent: %+v %v", res, err)
	}
}

// zygoteAgent starts a zygote, a runner forked from it and the runner's
// agent; n > 1 starts that many runners of the one zygote. All end at
// cleanup.
func zygoteAgent(t *testing.T) (*runner.Runner, *procs.Agent) {
	t.Helper()
	rs, as := zygoteAgents(t, 1)
	return rs[0], as[0]
}

func zygoteAgents(t *testing.T, n int) ([]*runner.Runner, []*procs.Agent) {
	t.Helper()
	testenv.RequireRoot(t)
	dir := testenv.Rootfs(t)
	e, err := container.New(container.Config{RunDir: t.TempDir(), CgroupName: testenv.CgroupName()})
	if err != nil {
		t.Fatalf("container.New: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	acquire := func(name string) (string, func(), error) {
		if name != "r" {
			return "", nil, errors.New("no such rootfs")
		}
		return dir, func() {}, nil
	}
	s, err := zygote.New(zygote.Config{Engine: e, Acquire: acquire, Profiles: []zygote.Profile{{Rootfs: "r", Children: 4, Bare: true}},
		Env: runner.ZygoteEnv(), Prelude: runner.ZygotePrelude()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	var rs []*runner.Runner
	var as []*procs.Agent
	for range n {
		r, err := runner.Start(ctx, s, container.Spec{RootfsDir: dir, Limits: container.Limits{Timeout: 10 * time.Minute, OutputBytes: 64 << 20}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		if !r.Forked() {
			t.Fatal("the runner was not forked from the zygote")
		}
		a, err := r.StartAgent(ctx)
		if err != nil {
			t.Fatalf("StartAgent: %v", err)
		}
		t.Cleanup(func() { a.Close() })
		rs, as = append(rs, r), append(as, a)
	}
	return rs, as
}
