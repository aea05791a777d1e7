package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/cgroup"
	"github.com/nsbox/nsbox/container/internal/leftovers"
	"github.com/nsbox/nsbox/container/internal/locks"
	"github.com/nsbox/nsbox/container/internal/testenv"
)

// Engines with different run dirs share the host's uid slots, so two live
// sandboxes never get the same host uid, but each keeps its sandboxes'
// liveness locks in its own run dir; and no lock file outlives its sandbox.
func TestEnginesShareUIDSlotsNotLivenessLocks(t *testing.T) {
	engines := []*Engine{newTestEngine(t), newTestEngine(t)}
	if engines[0].liveDir == engines[1].liveDir {
		t.Fatalf("both engines keep liveness locks in %s", engines[0].liveDir)
	}
	owners := map[int]string{}
	var sbs []*Sandbox
	for i := range 6 {
		e := engines[i%2]
		sb, err := e.Start(context.Background(), Spec{RootfsDir: testenv.Rootfs(t), Argv: []string{"sleep", "60"}})
		if err != nil {
			t.Fatal(err)
		}
		sbs = append(sbs, sb)
		uid := sb.proc.owner()
		if other, ok := owners[uid]; ok {
			t.Errorf("host uid %d given to %s and %s", uid, other, sb.ID())
		}
		owners[uid] = sb.ID()
		if _, err := os.Stat(locks.LivePath(e.liveDir, sb.ID())); err != nil {
			t.Errorf("liveness lock not in the engine's run dir: %v", err)
		}
		if _, err := os.Stat(locks.LivePath(LockDir, sb.ID())); err == nil {
			t.Errorf("liveness lock of %s in the host-wide %s", sb.ID(), LockDir)
		}
	}
	for _, sb := range sbs {
		sb.Kill(StatusKilled)
		if _, err := sb.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range engines {
		if ents, _ := os.ReadDir(e.liveDir); len(ents) != 0 {
			t.Errorf("%d liveness lock files left in %s", len(ents), e.liveDir)
		}
	}
	// A slot's file is gone with it; another engine on the host may have
	// taken the slot since, and then holds a new file.
	for uid := range owners {
		p := filepath.Join(LockDir, fmt.Sprintf("uid-%d.lock", (uid-UIDBase-1)/2))
		f, err := locks.Existing(p)
		if err == nil {
			f.Close()
			t.Errorf("free lock file %s left behind", p)
		} else if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.EWOULDBLOCK) {
			t.Error(err)
		}
	}
}

// Recover takes back only what its own run dir's liveness locks name: a
// dead engine's sandbox cgroup, whose free lock is in run dir A, is left
// alone by an engine on run dir B with the same cgroup parent, and removed
// by the next engine on A.
func TestRecoverKeepsToItsRunDir(t *testing.T) {
	a := newTestEngine(t)
	id := "dead-" + NewID()
	if _, err := a.cgroups.Create(id, cgroup.Limits{MemoryBytes: 64 << 20, Pids: 8, CPUs: 1}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(locks.LivePath(a.liveDir, id), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if n := recoverOn(t, t.TempDir(), a); n != 0 {
		t.Errorf("an engine on another run dir recovered %d sandboxes", n)
	}
	if n := recoverOn(t, a.cfg.RunDir, a); n != 1 {
		t.Errorf("the next engine on the run dir recovered %d sandboxes, want 1", n)
	}
}

// A dead engine whose run dir went with it (a test's, a conformance run's
// temporary one) names none of its cgroups any more: Recover on any run
// dir takes such a cgroup once it is empty and a minute old, and not
// before (an engine may be about to start its process in a new one).
func TestRecoverTakesAnOldCgroupNoEngineNames(t *testing.T) {
	a := newTestEngine(t)
	id := "orphan-" + NewID()
	if _, err := a.cgroups.Create(id, cgroup.Limits{MemoryBytes: 64 << 20, Pids: 8, CPUs: 1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.cgroups.Remove(id) }) // when the test fails before Recover takes it
	recover := func() int { return recoverOn(t, t.TempDir(), a) }
	if n := recover(); n != 0 {
		t.Fatalf("a new cgroup no engine names: %d recovered, want 0", n)
	}
	old := time.Now().Add(-2 * leftovers.StaleAge)
	for _, d := range a.cgroups.Dirs(id) {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if n := recover(); n != 1 {
		t.Fatalf("an empty cgroup no engine names, %v old: %d recovered, want 1", 2*leftovers.StaleAge, n)
	}
	if ids, _ := a.cgroups.Leftovers(); slices.Contains(ids, id) {
		t.Fatalf("the cgroup is still there: %q", ids)
	}
}

// A sandbox whose liveness lock is held by none but a process of its own
// (frozen: as one frozen between its clone and its exec keeps its dead
// engine's fds) belonged to a dead engine: the next engine's Recover kills
// and removes it. While a process outside holds the lock too (a live
// engine does), the sandbox is left alone.
func TestRecoverTakesALockHeldFromWithin(t *testing.T) {
	a := newTestEngine(t)
	id := "dead-" + NewID()
	cg, err := a.cgroups.Create(id, cgroup.Limits{MemoryBytes: 64 << 20, Pids: 8, CPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	f, err := locks.File(locks.LivePath(a.liveDir, id))
	if err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("sleep", "3600")
	holder.ExtraFiles = []*os.File{f} // the same open file: the lock's
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- holder.Wait() }()
	t.Cleanup(func() {
		_ = cg.Thaw()
		_ = holder.Process.Kill()
		<-exited
		_ = a.cgroups.Remove(id)
	})
	if err := cg.Add(holder.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := cg.Freeze(); err != nil {
		t.Fatal(err)
	}
	recover := func() int { return recoverOn(t, a.cfg.RunDir, a) }
	if n := recover(); n != 0 {
		t.Fatalf("a lock held outside the sandbox too (a live engine's): %d sandboxes recovered, want 0", n)
	}
	f.Close() // its engine is dead: only the frozen process inside holds the lock
	if n := recover(); n != 1 {
		t.Fatalf("a lock held from within alone: %d sandboxes recovered, want 1", n)
	}
	err = <-exited
	exited <- err // for the cleanup
	if err == nil {
		t.Fatal("the frozen holder exited 0, not killed")
	}
	if ids, _ := a.cgroups.Leftovers(); slices.Contains(ids, id) {
		t.Fatalf("the sandbox's cgroup is still there: %q", ids)
	}
	if _, err := os.Stat(locks.LivePath(a.liveDir, id)); !os.IsNotExist(err) {
		t.Fatalf("its lock file: %v", err)
	}
}

// recoverOn runs Recover on a new engine with run dir runDir and a's
// cgroup parent, and returns how many sandboxes it removed. The engine is
// not Closed: that would remove the cgroup parent a still has.
func recoverOn(t *testing.T, runDir string, a *Engine) int {
	t.Helper()
	e, err := New(Config{RunDir: runDir, CgroupName: a.cfg.CgroupName})
	if err != nil {
		t.Fatal(err)
	}
	defer e.self.Close()
	n, err := e.Recover()
	if err != nil {
		t.Fatal(err)
	}
	return n
}
