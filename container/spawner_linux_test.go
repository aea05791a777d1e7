package container

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/cgroup"
	"github.com/nsbox/nsbox/container/internal/testenv"
)

// requireSpawner skips unless the engine clones its inits from a spawner
// thread (cgroup v1 and hybrid hosts).
func requireSpawner(t *testing.T, e *Engine) {
	t.Helper()
	if e.spawner == nil {
		t.Skipf("cgroup %s: inits are cloned into their cgroup (CLONE_INTO_CGROUP), no spawner thread", e.CgroupMode())
	}
}

// threadCgroups maps each thread of this process to its /proc cgroup text.
func threadCgroups(t *testing.T) map[string]string {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "cgroup"))
		if err == nil { // a thread may end meanwhile
			m[task.Name()] = string(b)
		}
	}
	return m
}

// On v1 a cold init starts in its own cgroup in every hierarchy, cloned by
// the engine's spawner thread, which is the only thread of the engine ever
// to enter a cgroup of the engine, lives in the cgroup parent between
// clones, and is gone, with the parent, after Close.
func TestColdInitStartsInItsCgroup(t *testing.T) {
	var name string
	t.Cleanup(func() { // after the engine's Close
		for tid, cg := range threadCgroups(t) {
			if name != "" && strings.Contains(cg, name) {
				t.Errorf("thread %s still in the engine's cgroups after Close:\n%s", tid, cg)
			}
		}
	})
	e := newTestEngine(t)
	requireSpawner(t, e)
	name = "/" + e.cfg.CgroupName
	before := threadCgroups(t)
	sb, err := e.Start(context.Background(), Spec{RootfsDir: testenv.Rootfs(t), Argv: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	_, initCgs, err := cgroup.ReadProc("/proc", sb.Pid())
	if err != nil {
		t.Fatal(err)
	}
	for _, ctrl := range []string{"memory", "pids", "cpu", "cpuacct", "freezer"} {
		if !e.cgroups.Has(ctrl) {
			continue
		}
		if got, want := initCgs[ctrl], name+"/"+sb.ID(); !strings.HasSuffix(got, want) {
			t.Errorf("init's %s cgroup %q, want it to end in %q", ctrl, got, want)
		}
	}
	var inParent []string
	for tid, cg := range threadCgroups(t) {
		if !strings.Contains(cg, name) {
			continue
		}
		inParent = append(inParent, tid)
		if cg == before[tid] {
			continue // the spawner, already there
		}
		n, _ := strconv.Atoi(tid)
		_, cgs, err := cgroup.ReadProc("/proc/self/task", n)
		if err != nil {
			continue // the thread ended meanwhile
		}
		for _, ctrl := range []string{"memory", "pids"} {
			if p := cgs[ctrl]; e.cgroups.Has(ctrl) && !strings.HasSuffix(p, name) {
				t.Errorf("thread %s is in %s cgroup %q, not the parent", tid, ctrl, p)
			}
		}
	}
	if len(inParent) != 1 {
		t.Errorf("threads in the engine's cgroups: %v, want only the spawner", inParent)
	}
	for tid, cg := range threadCgroups(t) {
		if was, ok := before[tid]; ok && !strings.Contains(cg, name) && cg != was {
			t.Errorf("thread %s moved:\nbefore %s\nafter %s", tid, was, cg)
		}
	}
	sb.Kill(StatusKilled)
	if _, err := sb.Wait(); err != nil {
		t.Fatal(err)
	}
}

// An init dies with the thread that cloned it (its parent-death signal),
// and an engine whose spawner thread is gone still runs sandboxes: it
// clones them itself and moves them into their cgroups.
func TestInitDiesWithItsSpawner(t *testing.T) {
	e := newTestEngine(t)
	requireSpawner(t, e)
	sb, err := e.Start(context.Background(), Spec{RootfsDir: testenv.Rootfs(t), Argv: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	e.spawner.Close()
	select {
	case <-sb.Done():
	case <-time.After(time.Minute):
		t.Fatal("the init outlived the thread that cloned it")
	}
	res, err := sb.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Signal != "SIGKILL" {
		t.Errorf("init ended with %s (exit %d), want SIGKILL", res.Signal, res.ExitCode)
	}
	if got := mustOK(t, runPy(t, e, "print(1)")); got != "1" {
		t.Errorf("after the spawner: stdout %q", got)
	}
}
