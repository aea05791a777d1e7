package rootfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// MinPython is the oldest Python the runner and the process agent run on:
// both call os.waitstatus_to_exitcode, new in 3.9 (their syntax parses as
// 3.8). A tree whose python3 is older, or that has none, is argv-only
// (Meta.ArgvOnly).
const MinPython = "3.9"

// pathDirs is the sandbox's PATH (container/internal/runenv.BasePath) as
// directories of the tree: where a run's "python3" is found.
var pathDirs = []string{"usr/local/sbin", "usr/local/bin", "usr/sbin", "usr/bin", "sbin", "bin"}

// treePython finds the python3 a sandbox's PATH finds in tree (symlinks
// resolved inside the tree, as in a sandbox) and its version: "3.N" from the
// name it resolves to (python3 -> python3.12), made precise by the python3
// package's version when that agrees ("3.11.2"), else pythonVersion's
// guess. found is false when no PATH directory has a python3.
func treePython(tree string, pkgs []Package) (version string, found bool) {
	rootFd, err := openTree(tree)
	if err != nil {
		return "", false
	}
	defer unix.Close(rootFd)
	for _, d := range pathDirs {
		fd, err := openInRoot(rootFd, d+"/python3", unix.O_PATH)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		serr := unix.Fstat(fd, &st)
		target, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
		unix.Close(fd)
		if serr != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o111 == 0 {
			continue
		}
		guess := pythonVersion(tree, pkgs)
		if v, ok := strings.CutPrefix(filepath.Base(target), "python"); ok && majorMinor(v) != [2]int{} {
			if majorMinor(guess) == majorMinor(v) {
				return guess, true
			}
			return v, true
		}
		return guess, true
	}
	return "", false
}

// majorMinor parses "3.11.2" or "3.11" as {3, 11}; zero when it cannot.
func majorMinor(v string) [2]int {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return [2]int{}
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || major < 0 || minor < 0 {
		return [2]int{}
	}
	return [2]int{major, minor}
}

// PythonSupported reports whether the runner runs on Python version v
// ("3.11.2"): v is at least MinPython. An unknown version ("") is not.
func PythonSupported(v string) bool {
	got, min := majorMinor(v), majorMinor(MinPython)
	return got[0] > min[0] || (got[0] == min[0] && got[1] >= min[1])
}
