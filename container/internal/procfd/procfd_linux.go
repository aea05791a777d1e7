// Package procfd reads processes and their open files from /proc: whether
// one holds a given file open, its parent and descendants, whether it has
// exited. The
// runner uses it to find the processes a cell started that still write to
// the sandbox's output.
package procfd

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ID identifies an open file: its device and inode.
type ID [2]uint64

// Of is the ID of the file path names (a /proc/PID/fd/N link is followed).
func Of(path string) (ID, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return ID{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ID{}, false
	}
	return ID{st.Dev, st.Ino}, true
}

// Holds reports whether process pid has a file among ids open.
func Holds(pid int, ids map[ID]bool) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if id, ok := Of(dir + e.Name()); ok && ids[id] {
			return true
		}
	}
	return false
}

// Namespace lists the processes of pid's pid namespace, pid among them: in
// a sandbox, every process whatever its parent (none can make a namespace
// of its own there: seccomp). It refuses the caller's own namespace, where
// it would list the host's.
func Namespace(pid int) ([]int, error) {
	ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	if err != nil {
		return nil, err
	}
	if self, err := os.Readlink("/proc/self/ns/pid"); err != nil || self == ns {
		return nil, fmt.Errorf("process %d: not in a pid namespace of its own (%s)", pid, ns)
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err == nil && l == ns {
			out = append(out, p)
		}
	}
	return out, nil
}

// NSPid is pid's pid in its own pid namespace (the last of its status's
// NSpid), 0 when unknown.
func NSPid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, ln := range strings.Split(string(b), "\n") {
		if f := strings.Fields(ln); len(f) > 1 && f[0] == "NSpid:" {
			n, _ := strconv.Atoi(f[len(f)-1])
			return n
		}
	}
	return 0
}

// Holders lists the processes that have a file among ids open.
func Holders(ids map[ID]bool) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && Holds(pid, ids) {
			out = append(out, pid)
		}
	}
	return out
}

// Parent returns pid's parent (0 when pid is gone or its stat unreadable).
func Parent(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// Gone reports whether pid has exited: no longer in /proc, or a zombie.
func Gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}

// Descendants returns pid's children, their children and so on, through
// every thread's children list (/proc/PID/task/TID/children). The tree
// should be frozen while it is read: a process that forks meanwhile may
// be missed.
func Descendants(pid int) []int {
	var out []int
	seen := map[int]bool{pid: true}
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		tdir := "/proc/" + strconv.Itoa(queue[0]) + "/task/"
		tasks, err := os.ReadDir(tdir)
		if err != nil {
			continue
		}
		for _, t := range tasks {
			b, err := os.ReadFile(tdir + t.Name() + "/children")
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil && !seen[c] {
					seen[c] = true
					out = append(out, c)
					queue = append(queue, c)
				}
			}
		}
	}
	return out
}
