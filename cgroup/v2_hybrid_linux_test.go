package cgroup

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestV2MechanicsOnUnified drives the v2 code path (mkdir, CLONE_INTO_CGROUP,
// cgroup.kill, cpu.stat, rmdir) on a hybrid host's controller-less cgroup2 at
// /sys/fs/cgroup/unified. Limits and the supervisor move need a real v2
// host; TestCreateWritesLimits and TestCloneIntoCgroup cover them there.
// newUnifiedManager returns a v2 Manager on a hybrid host's controller-less
// cgroup2, removed when the test ends; it skips elsewhere.
func newUnifiedManager(t testing.TB) *Manager {
	t.Helper()
	requireRoot(t)
	l, err := LocateSelf()
	if err != nil {
		t.Fatal(err)
	}
	if l.Mode != ModeHybrid || l.Unified != "/sys/fs/cgroup/unified" {
		t.Skipf("needs a hybrid host with this process at the root of /sys/fs/cgroup/unified; mode %s, unified %q", l.Mode, l.Unified)
	}
	b := make([]byte, 6)
	rand.Read(b)
	m, err := newManager("nsbox-test-"+hex.EncodeToString(b), Layout{Mode: ModeV2, Unified: l.Unified})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanupManager(t, m) })
	if !m.v2 || len(m.hier) != 1 {
		t.Fatalf("manager %+v is not a v2 one", m)
	}
	return m
}

func TestV2MechanicsOnUnified(t *testing.T) {
	m := newUnifiedManager(t)
	c := create(t, m, "v2", Limits{})
	if c.CloneFD() < 0 {
		t.Fatal("CloneFD = -1 on v2")
	}

	cmd := exec.Command("/bin/sh", "-c", "sleep 1000 & sleep 1000 & cat /proc/self/cgroup; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: c.CloneFD()}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make([]byte, 4096)
	n, _ := out.Read(line)
	if want := "/" + m.Name() + "/v2"; !strings.Contains(string(line[:n]), "0::"+want+"\n") {
		t.Fatalf("child's /proc/self/cgroup %q, want 0::%s", line[:n], want)
	}
	pids, err := c.Pids()
	if err != nil || len(pids) < 3 {
		t.Fatalf("Pids = %v, %v; want sh, two sleeps (and maybe cat)", pids, err)
	}
	if _, err := c.Stats(); err != nil {
		t.Fatal(err)
	}
	// The freeze-and-kill path of kernels without cgroup.kill.
	if err := c.killFrozen(time.Now().Add(killTimeout)); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	for _, pid := range pids {
		if !gone(pid) {
			t.Errorf("pid %d alive after Kill", pid)
		}
	}
	// cgroup.kill.
	cmd2 := exec.Command("/bin/sh", "-c", "sleep 1000 & wait")
	cmd2.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: c.CloneFD()}
	if err := cmd2.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd2.Process.Kill(); cmd2.Wait() })
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := cmd2.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("sh after cgroup.kill: %v, want killed", err)
	}
	if pids, err := c.Pids(); err != nil || len(pids) != 0 {
		t.Errorf("Pids after Kill = %v, %v", pids, err)
	}
	if ids, err := m.Leftovers(); err != nil || len(ids) != 1 || ids[0] != "v2" {
		t.Errorf("Leftovers = %v, %v; want [v2]", ids, err)
	}
	if err := c.Delete(); err != nil {
		t.Fatal(err)
	}
	if c.CloneFD() != -1 {
		t.Error("CloneFD still open after Delete")
	}
	if _, err := os.Stat(filepath.Join(m.hier[0], "v2")); !os.IsNotExist(err) {
		t.Errorf("leaf still exists after Delete: %v", err)
	}
}
