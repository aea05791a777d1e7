package interrupt

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/cgroup"
)

// benchName is the only shape of cgroup name Cgroups removes.
var benchName = regexp.MustCompile(`^nsbox-bench-[0-9a-z]+$`)

// Hierarchies are the directories the bench's cgroup names live in: this
// process's own cgroup in each hierarchy, and on v2 the parent of its
// "supervisor" leaf (where an engine moves the process it runs in).
func Hierarchies() []string {
	l, err := cgroup.LocateSelf()
	if err != nil {
		return nil
	}
	var dirs []string
	for _, d := range append([]string{l.Unified}, mapValues(l.V1)...) {
		if d == "" {
			continue
		}
		dirs = append(dirs, d)
		if filepath.Base(d) == "supervisor" {
			dirs = append(dirs, filepath.Dir(d))
		}
	}
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// Cgroups removes dir/name, with everything below it, in each of dirs for
// each of names that is a bench name (nsbox-bench-<id>): it kills the processes
// in them, then removes the directories deepest first, trying until
// deadline passes (a killed process leaves its cgroup a moment later). It
// returns the directories still there.
func Cgroups(dirs, names []string, wait time.Duration) (left []string) {
	deadline := time.Now().Add(wait)
	for _, dir := range dirs {
		for _, name := range names {
			if !benchName.MatchString(name) {
				continue
			}
			root := filepath.Join(dir, name)
			for {
				left = Tree(root)
				if len(left) == 0 || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	return left
}

// Tree kills what runs in the cgroup tree at root and removes its
// directories, deepest first; it returns those still there.
func Tree(root string) (left []string) {
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for _, d := range slices.Backward(dirs) {
		killProcs(d)
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			left = append(left, d)
		}
	}
	return left
}

// killProcs sends SIGKILL to every process in the cgroup directory d.
func killProcs(d string) {
	b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
