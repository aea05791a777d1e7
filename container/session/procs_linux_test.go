package session

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/container/runner"
)

// sandboxPids lists the host pids in the engine's sandbox cgroups.
func sandboxPids(t *testing.T, name string) []int {
	t.Helper()
	var pids []int
	for _, d := range cgroupDirs(t, name) {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// A session's processes run beside its cells and are gone with it: a
// background process a command left behind too.
func TestProcessesEndWithTheSession(t *testing.T) {
	m, name := newManager(t, Config{})
	s := create(t, m, Options{Processes: true})
	if !s.Info().Processes {
		t.Fatal("Info does not say the session has processes")
	}
	a, err := s.Procs()
	if err != nil {
		t.Fatalf("Procs: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A command that leaves a background child behind, and one that runs on.
	p, err := a.Start(ctx, procs.Config{Cmd: "sh", Args: []string{"-c", "sleep 1000 >/dev/null 2>&1 & echo started"}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	for {
		ev, err := p.Next(ctx)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if ev.End != nil {
			if ev.End.ExitCode != 0 {
				t.Fatalf("end %+v", ev.End)
			}
			break
		}
	}
	long, err := a.Start(ctx, procs.Config{Cmd: "sleep", Args: []string{"1000"}, Tag: "long"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	// Cells run meanwhile and see the processes.
	if res := run(t, s, "import subprocess\nsubprocess.run(['sh', '-c', 'ps -e -o comm= 2>/dev/null || ls /proc'], capture_output=True).returncode"); res.Status != runner.StatusOK {
		t.Fatalf("a cell beside the processes: %+v", res)
	}
	pids := sandboxPids(t, name)
	if len(pids) < 4 { // the runner, the agent, two sleeps
		t.Fatalf("sandbox pids %v: want the runner, the agent and both sleeps", pids)
	}
	if err := m.Delete(s.ID()); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d of the deleted session still exists: %v", pid, err)
		}
	}
	if d := cgroupDirs(t, name); len(d) > 0 {
		t.Errorf("cgroups left: %v", d)
	}
	// The running process's subscription ends: with ErrClosed, or after an
	// End when the agent saw its kill before its own.
	var end *procs.End
	for {
		ev, err := long.Next(ctx)
		if err != nil {
			if !errors.Is(err, procs.ErrClosed) && (!errors.Is(err, io.EOF) || end == nil || end.Exited) {
				t.Errorf("a running process's subscription after Delete: %v (end %+v), want ErrClosed", err, end)
			}
			break
		}
		end = ev.End
	}
	if _, err := s.Procs(); !errors.Is(err, ErrDead) {
		t.Errorf("Procs of a deleted session: %v, want ErrDead", err)
	}
}

func TestNoProcessesUnlessAsked(t *testing.T) {
	m, _ := newManager(t, Config{})
	s := create(t, m, Options{})
	if _, err := s.Procs(); !errors.Is(err, ErrNoProcesses) {
		t.Fatalf("Procs: %v, want ErrNoProcesses", err)
	}
}

// A pooled runner gets its agent at the session's creation too.
func TestPooledRunnerProcesses(t *testing.T) {
	var took atomic.Int32
	var m *Manager
	m, _ = newManager(t, Config{Take: func(opts Options) *runner.Runner {
		r, err := runner.Start(context.Background(), m.cfg.Starter, container.Spec{
			RootfsDir: opts.RootfsDir, Limits: container.Limits{Timeout: time.Hour},
		})
		if err != nil {
			t.Errorf("start the pooled runner: %v", err)
			return nil
		}
		if _, err := r.Preimport(context.Background(), nil, time.Minute); err != nil {
			t.Errorf("preimport: %v", err)
		}
		took.Add(1)
		return r
	}})
	s := create(t, m, Options{Processes: true})
	if took.Load() != 1 {
		t.Fatal("the session did not take the pooled runner")
	}
	a, err := s.Procs()
	if err != nil {
		t.Fatalf("Procs: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := a.Start(ctx, procs.Config{Cmd: "echo", Args: []string{"pooled"}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	var out []byte
	for {
		ev, err := p.Next(ctx)
		if err != nil {
			break
		}
		if ev.Data != nil {
			out = append(out, ev.Data.Stdout...)
		}
	}
	if string(out) != "pooled\n" {
		t.Fatalf("stdout %q", out)
	}
}

// Contexts go through Exec; DropContext resets one.
func TestSessionContexts(t *testing.T) {
	m, _ := newManager(t, Config{})
	s := create(t, m, Options{})
	exec := func(ctxID, code string) *ExecResult {
		t.Helper()
		res, err := s.Exec(context.Background(), runner.ExecRequest{Code: code, Context: ctxID, Timeout: time.Minute})
		if err != nil {
			t.Fatalf("Exec: %v", err)
		}
		return res
	}
	exec("", "v = 'default'")
	exec("c1", "v = 'c1'")
	if res := exec("c2", "'v' in globals()"); res.Value != "False" {
		t.Fatalf("c2 sees another context's variable: %q", res.Value)
	}
	if res := exec("c1", "v"); res.Value != "'c1'" || res.Count != 2 {
		t.Fatalf("c1: value %q count %d", res.Value, res.Count)
	}
	if err := s.DropContext(context.Background(), "c1"); err != nil {
		t.Fatalf("DropContext: %v", err)
	}
	if res := exec("c1", "'v' in globals()"); res.Value != "False" || res.Count != 1 {
		t.Fatalf("c1 after its drop: value %q count %d", res.Value, res.Count)
	}
	if res := exec("", "v"); res.Value != "'default'" {
		t.Fatalf("default context: %q", res.Value)
	}
}
