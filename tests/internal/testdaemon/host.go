package testdaemon

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// LockDir is where every engine keeps its host-wide uid-slot locks; the
// liveness locks of a daemon's sandboxes are under its run dir (LiveLock).
const LockDir = "/run/nsbox/locks"

// CgroupParents lists a daemon's cgroup parent (<own cgroup>/<name>) in
// every hierarchy this test process belongs to.
func CgroupParents(t testing.TB, name string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var parents []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var bases []string
		if parts[1] == "" {
			bases = []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}
		} else {
			bases = []string{filepath.Join("/sys/fs/cgroup", parts[1])}
			for _, c := range strings.Split(parts[1], ",") {
				bases = append(bases, filepath.Join("/sys/fs/cgroup", strings.TrimPrefix(c, "name=")))
			}
		}
		for _, b := range bases {
			if seen[b] {
				continue
			}
			seen[b] = true
			parent := filepath.Join(b, parts[2], name)
			if st, err := os.Stat(parent); err == nil && st.IsDir() {
				parents = append(parents, parent)
			}
		}
	}
	return parents
}

// LeftoverCgroups lists the sandbox cgroups under the cgroup parent of
// the daemon with cgroup name name, in every hierarchy.
func LeftoverCgroups(t testing.TB, name string) []string {
	t.Helper()
	var left []string
	for _, parent := range CgroupParents(t, name) {
		ents, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() {
				left = append(left, filepath.Join(parent, e.Name()))
			}
		}
	}
	return left
}

// RemoveCgroups removes what a SIGKILLed daemon could not: its sandbox
// cgroups (empty once the sandboxes have died with their daemon), their
// liveness lock files and its cgroup parent, so test runs leave nothing
// on the host. A daemon killed inside a v1 kill (freeze, SIGKILL every
// process, thaw) leaves its sandbox frozen, its processes unable to die
// until thawed (a new daemon's Recover does that): they are thawed here,
// and whatever is still in them killed.
func RemoveCgroups(t testing.TB, name, runDir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	parents := CgroupParents(t, name)
	// Frozen sandboxes first (paused sessions of a killed daemon): their
	// processes die only once thawed, which only the freezer hierarchy
	// can do, and every hierarchy's directories stay busy until then.
	for _, parent := range parents {
		_ = filepath.WalkDir(parent, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				thawAndKill(p)
			}
			return nil
		})
	}
	for _, parent := range parents {
		for {
			ents, _ := os.ReadDir(parent)
			for _, e := range ents {
				dir := filepath.Join(parent, e.Name())
				if !e.IsDir() {
					continue
				}
				if syscall.Rmdir(dir) == nil {
					RemoveFreeLock(LiveLock(runDir, e.Name()))
					continue
				}
				thawAndKill(dir)
			}
			err := syscall.Rmdir(parent)
			if err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("cannot remove the test daemon's cgroup %s: %v", parent, err)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// LiveLock is the liveness lock file of the sandbox with cgroup name id, of
// a daemon with run dir runDir.
func LiveLock(runDir, id string) string { return filepath.Join(runDir, "locks", "sandbox-"+id+".lock") }

// RemoveFreeLock deletes a sandbox's liveness lock file unless someone
// holds it: a SIGKILLed daemon leaves those of its live sandboxes.
func RemoveFreeLock(path string) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
		os.Remove(path)
	}
}

// Mounts lists the mount points under dir (a daemon's run dir).
func Mounts(t testing.TB, dir string) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			left = append(left, f[4])
		}
	}
	return left
}

// Children counts the processes whose parent is pid.
func Children(pid int) int {
	n := 0
	for _, p := range procs() {
		if p.ppid == pid {
			n++
		}
	}
	return n
}

// Proc is a process, told from a later one with its pid by its start time.
type Proc struct {
	Pid   int
	start string
}

// Alive reports whether p still runs (or is a zombie).
func (p Proc) Alive() bool {
	ps, ok := stat(p.Pid)
	return ok && ps.start == p.start
}

// Descendants lists the processes below pid, however deep.
func Descendants(pid int) []Proc {
	all := procs()
	var out []Proc
	for _, p := range all {
		for q := p.ppid; q > 1; q = all[q].ppid {
			if q == pid {
				out = append(out, Proc{Pid: p.pid, start: p.start})
				break
			}
		}
	}
	return out
}

type procStat struct {
	pid, ppid int
	start     string
}

// procs maps every process to its /proc/<pid>/stat.
func procs() map[int]procStat {
	ents, _ := os.ReadDir("/proc")
	all := map[int]procStat{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ps, ok := stat(pid); ok {
			all[pid] = ps
		}
	}
	return all
}

func stat(pid int) (procStat, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, false
	}
	// After the command: state, ppid, ... starttime is the 20th.
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return procStat{pid: pid, ppid: ppid, start: f[19]}, true
}

// LoadAvg is the host's 1, 5 and 15 minute load averages.
func LoadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// RSS returns pid's resident set and its peak (VmRSS, VmHWM) in bytes.
func RSS(pid int) (now, peak int64) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			now = v << 10
		case "VmHWM:":
			peak = v << 10
		}
	}
	return now, peak
}

// thawAndKill thaws a v1 freezer cgroup dir (other hierarchies have no
// freezer.state) and SIGKILLs the processes still listed in it.
func thawAndKill(dir string) {
	_ = os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("THAWED"), 0)
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
