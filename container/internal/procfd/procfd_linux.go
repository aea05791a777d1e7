// Package procfd reads a process tree and its open files from /proc: the
// descendants of a process, and whether one holds a given file open. The
// runner uses it to find the processes a cell started that still write to
// the sandbox's output.
package procfd

import (
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
