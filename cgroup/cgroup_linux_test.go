package cgroup

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("requires root: creates cgroups")
	}
}

// newTestManager returns a Manager with a unique name whose sandbox cgroups
// and parent directory are removed when the test ends.
func newTestManager(t testing.TB) *Manager {
	t.Helper()
	requireRoot(t)
	b := make([]byte, 6)
	rand.Read(b)
	m, err := NewManager("nsbox-test-" + hex.EncodeToString(b))
	if errors.Is(err, ErrSharedCgroup) {
		t.Skipf("cgroup v2: this test process shares its cgroup with others (%v); run the test binary alone in a delegated cgroup, e.g. go test -c && systemd-run -p Delegate=yes --wait --pty ./cgroup.test", err)
	}
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	t.Cleanup(func() { cleanupManager(t, m) })
	return m
}

func cleanupManager(t testing.TB, m *Manager) {
	t.Helper()
	ids, err := m.Leftovers()
	if err != nil {
		t.Errorf("cleanup: %v", err)
	}
	for _, id := range ids {
		if err := m.Remove(id); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
	if err := m.Close(); err != nil {
		t.Errorf("cleanup: %v", err)
	}
	for _, p := range m.hier {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("cleanup: %s still exists", p)
		}
	}
}

func create(t *testing.T, m *Manager, id string, l Limits) *Cgroup {
	t.Helper()
	c, err := m.Create(id, l)
	if err != nil {
		t.Fatalf("Create(%s): %v", id, err)
	}
	t.Cleanup(func() {
		c.Kill()
		if err := c.Delete(); err != nil {
			t.Errorf("Delete: %v", err)
		}
	})
	return c
}

// gated is a shell that waits for a line on stdin before running script, so
// it can be moved into a cgroup before it does anything.
type gated struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

func startGated(t *testing.T, script string) *gated {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "read _ || exit 1; "+script)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return &gated{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
}

func (g *gated) release(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(g.stdin, "\n"); err != nil {
		t.Fatal(err)
	}
}

func readTrim(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestCreateWritesLimits(t *testing.T) {
	m := newTestManager(t)
	c := create(t, m, "limits", Limits{MemoryBytes: 64 << 20, Pids: 16, CPUs: 0.5})
	type file struct{ ctrl, name, want string }
	var files []file
	if m.v2 {
		files = []file{
			{"", "memory.max", "67108864"},
			{"", "memory.oom.group", "1"},
			{"", "pids.max", "16"},
			{"", "cpu.max", "50000 100000"},
		}
		if fileExists(c.hier[0], "memory.swap.max") {
			files = append(files, file{"", "memory.swap.max", "0"})
		}
		if c.CloneFD() < 0 {
			t.Error("CloneFD = -1 on v2")
		}
	} else {
		files = []file{
			{"memory", "memory.limit_in_bytes", "67108864"},
			{"memory", "memory.swappiness", "0"},
			{"pids", "pids.max", "16"},
			{"cpu", "cpu.cfs_period_us", "100000"},
			{"cpu", "cpu.cfs_quota_us", "50000"},
		}
		if fileExists(c.dir["memory"], "memory.memsw.limit_in_bytes") {
			files = append(files, file{"memory", "memory.memsw.limit_in_bytes", "67108864"})
		}
		if c.CloneFD() != -1 {
			t.Errorf("CloneFD = %d on v1, want -1", c.CloneFD())
		}
	}
	for _, f := range files {
		t.Run(f.name, func(t *testing.T) {
			if got := readTrim(t, c.dir[f.ctrl].path, f.name); got != f.want {
				t.Errorf("%s = %q, want %q", f.name, got, f.want)
			}
		})
	}
	if _, err := m.Create("limits", Limits{}); err == nil {
		t.Error("Create of an existing id succeeded")
	}
}

func TestCreateRejects(t *testing.T) {
	m := newTestManager(t)
	for _, tc := range []struct {
		id string
		l  Limits
	}{
		{"", Limits{}}, {"..", Limits{}}, {"a/b", Limits{}}, {"neg", Limits{MemoryBytes: -1}}, {"negcpu", Limits{CPUs: -1}},
	} {
		if c, err := m.Create(tc.id, tc.l); err == nil {
			c.Delete()
			t.Errorf("Create(%q, %+v) succeeded", tc.id, tc.l)
		}
	}
	if _, err := NewManager("a/b"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("NewManager(a/b) err = %v, want ErrInvalidName", err)
	}
}

func TestMemoryLimitOOMKills(t *testing.T) {
	const limit = 64 << 20
	m := newTestManager(t)
	c := create(t, m, "oom", Limits{MemoryBytes: limit})
	g := startGated(t, `exec python3 -c "b = b'x' * (200 << 20); print(len(b))"`)
	if err := c.Add(g.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	g.release(t)
	err := g.cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("python exited with %v, want SIGKILL", err)
	}
	if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("python: %v, want killed by SIGKILL", ws)
	}
	s, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.OOMKills < 1 {
		t.Errorf("OOMKills = %d, want >= 1", s.OOMKills)
	}
	if s.MemoryPeakBytes < limit/2 || s.MemoryPeakBytes > limit+limit/16 {
		t.Errorf("MemoryPeakBytes = %d, want near the limit %d", s.MemoryPeakBytes, limit)
	}
	if s.CPUUsage <= 0 {
		t.Errorf("CPUUsage = %v, want > 0", s.CPUUsage)
	}
}

func TestPidsLimit(t *testing.T) {
	m := newTestManager(t)
	c := create(t, m, "pids", Limits{Pids: 8})
	g := startGated(t, `i=0; while [ $i -lt 20 ]; do sleep 1000 >/dev/null 2>&1 </dev/null & i=$((i+1)); done; echo done; wait`)
	if err := c.Add(g.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	g.release(t)
	// The shell either prints "done" (forks failed softly) or dies on the
	// first failed fork; either way its loop is over.
	g.out.ReadString('\n')
	s, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.PidsCurrent > 8 || s.PidsCurrent < 1 {
		t.Errorf("PidsCurrent = %d, want 1..8", s.PidsCurrent)
	}
	if !s.PidsLimitHit {
		t.Error("PidsLimitHit = false after a fork loop past the limit")
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
}

// gone reports whether pid has exited (a zombie waiting for a reaper counts).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || strings.HasPrefix(s[i+1:], " Z") || strings.HasPrefix(s[i+1:], " X")
}

func TestKillAndDelete(t *testing.T) {
	m := newTestManager(t)
	c := create(t, m, "kill", Limits{Pids: 32})
	g := startGated(t, `sleep 1000 & sleep 1000 & echo started; wait`)
	if err := c.Add(g.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	g.release(t)
	if line, _ := g.out.ReadString('\n'); line != "started\n" {
		t.Fatalf("shell said %q", line)
	}
	pids, err := c.Pids()
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) != 3 {
		t.Fatalf("Pids = %v, want the shell and two sleeps", pids)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	g.cmd.Wait()
	for _, pid := range pids {
		if !gone(pid) {
			t.Errorf("pid %d still alive after Kill", pid)
		}
	}
	if err := c.Delete(); err != nil {
		t.Fatal(err)
	}
	for _, d := range c.hier {
		if _, err := os.Stat(d.path); !os.IsNotExist(err) {
			t.Errorf("%s still exists after Delete", d.path)
		}
	}
	if err := c.Delete(); err != nil {
		t.Errorf("second Delete: %v", err)
	}
	if err := c.Kill(); err != nil {
		t.Errorf("Kill after Delete: %v", err)
	}
}

func TestLeftoversRemove(t *testing.T) {
	m := newTestManager(t)
	var sleepers []*exec.Cmd
	for _, id := range []string{"left-a", "left-b"} {
		c, err := m.Create(id, Limits{Pids: 4})
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sleep", "1000")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		if err := c.Add(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		sleepers = append(sleepers, cmd)
		// Forget c, as a crashed daemon would.
	}
	m2, err := NewManager(m.Name())
	if err != nil {
		t.Fatal(err)
	}
	ids, err := m2.Leftovers()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"left-a", "left-b"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("Leftovers = %v, want %v", ids, want)
	}
	for _, id := range ids {
		if err := m2.Remove(id); err != nil {
			t.Fatalf("Remove(%s): %v", id, err)
		}
	}
	for _, cmd := range sleepers {
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("sleeper %d: %v, want killed by SIGKILL", cmd.Process.Pid, err)
		}
	}
	if ids, err := m2.Leftovers(); err != nil || len(ids) != 0 {
		t.Errorf("Leftovers after Remove = %v, %v; want none", ids, err)
	}
}

func TestStatsCPU(t *testing.T) {
	m := newTestManager(t)
	c := create(t, m, "cpu", Limits{CPUs: 1})
	g := startGated(t, `i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done`)
	if err := c.Add(g.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	g.release(t)
	if err := g.cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	s, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.CPUUsage <= 0 || s.UserCPU <= 0 || s.UserCPU+s.SystemCPU > s.CPUUsage+time.Millisecond {
		t.Errorf("CPU usage %v user %v system %v: want usage > 0 and user in (0, usage]", s.CPUUsage, s.UserCPU, s.SystemCPU)
	}
}

func TestCloneIntoCgroup(t *testing.T) {
	m := newTestManager(t)
	if m.Mode() != ModeV2 {
		t.Skipf("CLONE_INTO_CGROUP needs cgroup v2; this host is %s", m.Mode())
	}
	c := create(t, m, "clone", Limits{Pids: 4})
	cmd := exec.Command("/bin/cat", "/proc/self/cgroup")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: c.CloneFD()}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "/" + m.Name() + "/clone\n"; !strings.HasSuffix(string(out), want) {
		t.Errorf("child's cgroup %q, want suffix %q", out, want)
	}
}

// Rewrite of a member moves nothing: the process stays where it is, in
// every hierarchy.
func TestRewriteKeepsTheMember(t *testing.T) {
	m := newTestManager(t)
	c := create(t, m, "rewrite", Limits{Pids: 8})
	g := startGated(t, `exit 0`)
	pid := g.cmd.Process.Pid
	if err := c.Add(pid); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Rewrite(pid); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Errorf("Rewrite moved the process:\nbefore %s\nafter %s", before, after)
	}
	if pids, err := c.Pids(); err != nil || len(pids) != 1 || pids[0] != pid {
		t.Errorf("Pids = %v (%v), want [%d]", pids, err, pid)
	}
	g.release(t)
	g.cmd.Wait()
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
}

// TestFreezeThaw: a frozen cgroup's busy process uses no CPU until it is
// thawed, then runs again; a frozen cgroup can still be killed.
func TestFreezeThaw(t *testing.T) {
	m := newTestManager(t)
	c := create(t, m, "freeze", Limits{CPUs: 1})
	g := startGated(t, `while :; do :; done`)
	if err := c.Add(g.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	g.release(t)
	cpu := func() time.Duration {
		t.Helper()
		s, err := c.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return s.CPUUsage
	}
	// spins waits until the loop has used d of CPU since from: it runs.
	spins := func(from, d time.Duration, what string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); cpu()-from < d; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the busy loop used %v of CPU in 30 s, want %v", what, cpu()-from, d)
			}
		}
	}
	spins(0, 20*time.Millisecond, "before the freeze")
	if err := c.Freeze(); err != nil {
		t.Fatal(err)
	}
	frozen := cpu()
	time.Sleep(300 * time.Millisecond)
	if d := cpu() - frozen; d > 5*time.Millisecond {
		t.Errorf("a frozen busy loop used %v of CPU in 300 ms", d)
	}
	if err := c.Thaw(); err != nil {
		t.Fatal(err)
	}
	spins(cpu(), 20*time.Millisecond, "thawed")
	if err := c.Freeze(); err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(); err != nil {
		t.Fatalf("Kill of a frozen cgroup: %v", err)
	}
	_ = g.cmd.Wait()
}

// A leaf's files are opened through its O_PATH fd; the fd must not keep
// the directory from being removed, a file of a removed leaf must read as
// missing (as by its path), and errors must still name the whole path.
func TestLeafFDs(t *testing.T) {
	m := newTestManager(t)
	c := create(t, m, "leaffds", Limits{})
	for _, d := range c.hier {
		if d.fd < 0 {
			t.Fatalf("%s: no O_PATH fd after Create", d.path)
		}
	}
	d := c.hier[0]
	_, err := readFile(d, "no-such-file", nil)
	if !isNotExist(err) || !strings.Contains(err.Error(), filepath.Join(d.path, "no-such-file")) {
		t.Errorf("read of a missing file: %v, want ENOENT naming %s", err, filepath.Join(d.path, "no-such-file"))
	}
	if err := unix.Rmdir(d.path); err != nil {
		t.Fatalf("rmdir with the O_PATH fd open: %v", err)
	}
	if _, err := readFile(d, "cgroup.procs", nil); !isNotExist(err) {
		t.Errorf("read through the fd of a removed leaf: %v, want ENOENT", err)
	}
	if err := c.Delete(); err != nil {
		t.Fatal(err)
	}
	for _, d := range c.hier {
		if d.fd >= 0 {
			t.Errorf("%s: fd %d still open after Delete", d.path, d.fd)
		}
	}
	if err := c.Add(os.Getpid()); !isNotExist(err) || !strings.Contains(err.Error(), d.path) {
		t.Errorf("Add after Delete: %v, want ENOENT naming %s", err, d.path)
	}
}

// A Background cgroup's processes run on what the others leave: two busy
// loops pinned to one CPU, one of them in a background cgroup, share it by
// their weights (2 to 1024 on v1, 1 to 100 on v2); after Foreground they
// come to share it evenly. Shares are read over the CPU time the two
// loops got, not over a span of the clock: on a loaded host (or a guest
// whose CPUs the host starves) a second of the clock may hold little of
// CPU 0, and right after Foreground the scheduler first lets the
// foreground loop catch up on the virtual time the background one ran
// ahead at its low weight.
func TestBackgroundYields(t *testing.T) {
	m := newTestManager(t)
	if !m.Has("cpu") {
		t.Skip("no cpu controller for sandboxes here")
	}
	bg := create(t, m, "bg", Limits{Background: true})
	fg := create(t, m, "fg", Limits{})
	for _, c := range []*Cgroup{bg, fg} {
		g := startGated(t, "while :; do :; done")
		if err := c.Add(g.cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		// Pinned after the move: joining a cgroup with a cpuset (v2 with
		// cpuset enabled above it) resets a task's affinity.
		var one unix.CPUSet
		one.Set(0)
		if err := unix.SchedSetaffinity(g.cmd.Process.Pid, &one); err != nil {
			t.Fatal(err)
		}
		g.release(t)
	}
	usage := func(c *Cgroup) time.Duration {
		s, err := c.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return s.CPUUsage
	}
	// deadline only a hang meets: the loops get no CPU at all.
	deadline := time.Now().Add(2 * time.Minute)
	// bgShare is the background loop's share of the next window of CPU
	// time the two loops get; -1 when the deadline passes first.
	bgShare := func(window time.Duration) float64 {
		b0, f0 := usage(bg), usage(fg)
		for {
			b, f := usage(bg)-b0, usage(fg)-f0
			if b+f >= window {
				return float64(b) / float64(b+f)
			}
			if time.Now().After(deadline) {
				return -1
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	weight := func(c *Cgroup) string {
		if m.v2 {
			return "cpu.weight " + readTrim(t, c.hier[0].path, "cpu.weight")
		}
		return "cpu.shares " + readTrim(t, c.dir["cpu"].path, "cpu.shares")
	}
	switch s := bgShare(time.Second); {
	case s < 0:
		t.Fatal("the two loops got less than a second of CPU in 2 minutes")
	case s > 0.05:
		t.Errorf("the background loop had %.1f%% of the CPU, want under 5%% (background %s, foreground %s)", 100*s, weight(bg), weight(fg))
	}
	if err := bg.Foreground(); err != nil {
		t.Fatal(err)
	}
	last := -1.0
	for {
		s := bgShare(500 * time.Millisecond)
		if s >= 0.3 && s <= 0.7 {
			break
		}
		if s < 0 {
			t.Fatalf("after Foreground the loop's share never came near half in 2 minutes: %.1f%% of the last 0.5 s of CPU (background %s, foreground %s)",
				100*last, weight(bg), weight(fg))
		}
		last = s
	}
}

// RemoveIdle takes a cgroup nobody names only when it is old and empty,
// and never kills: a fresh one stays, so does an old one with a process in
// it (the process lives on), and an old empty one goes.
func TestRemoveIdle(t *testing.T) {
	m := newTestManager(t)
	const idle = time.Minute
	old := time.Now().Add(-2 * idle)
	backdate := func(id string) {
		t.Helper()
		for _, d := range m.Dirs(id) {
			if err := os.Chtimes(d, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	remove := func(id string, want bool) {
		t.Helper()
		got, err := m.RemoveIdle(id, idle)
		if err != nil || got != want {
			t.Fatalf("RemoveIdle(%s) = %v, %v; want %v", id, got, err, want)
		}
		ids, _ := m.Leftovers()
		if gone := !slices.Contains(ids, id); gone != want {
			t.Fatalf("after RemoveIdle(%s) = %v the cgroups are %v", id, got, ids)
		}
	}
	if _, err := m.Create("idle-empty", Limits{Pids: 4}); err != nil {
		t.Fatal(err)
	}
	remove("idle-empty", false) // just made: an engine may be about to start its process
	backdate("idle-empty")
	remove("idle-empty", true)

	busy, err := m.Create("idle-busy", Limits{Pids: 4})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); m.Remove("idle-busy") })
	if err := busy.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	backdate("idle-busy")
	remove("idle-busy", false)
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the process in the busy cgroup: %v, want alive", err)
	}
}

// TestFreezeWhileForking: a cgroup whose processes keep starting others
// (four shells each starting /bin/true in a loop) is frozen, again and
// again: on v1 the freezer may stay FREEZING while new processes appear,
// which Freeze asks again for (a session's pause failed so under two busy
// loops). Frozen, no new process appears.
func TestFreezeWhileForking(t *testing.T) {
	m := newTestManager(t)
	c := create(t, m, "forking", Limits{})
	g := startGated(t, `for i in 1 2 3 4; do (while :; do /bin/true; done) & done; wait`)
	if err := c.Add(g.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	g.release(t)
	for round := range 20 {
		if err := c.Freeze(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		before, err := c.pids()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		after, _ := c.pids()
		if !slices.Equal(before, after) {
			t.Fatalf("round %d: processes changed while frozen: %v then %v", round, before, after)
		}
		if err := c.Thaw(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
}
