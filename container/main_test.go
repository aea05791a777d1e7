package container

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	// Sandboxes re-execute this test binary as their init.
	MaybeInit()
	maybeAttach()
	mountsBefore := countMounts()
	code := m.Run()
	// After the whole suite nothing of nsbox may remain on the host.
	if leaks := leftBehind(mountsBefore); len(leaks) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the suite left things behind:\n  %s\n", strings.Join(leaks, "\n  "))
		code = 1
	}
	os.Exit(code)
}

// countMounts counts host mounts that could be nsbox's: under /run/nsbox,
// a temp dir or a path naming nsbox. (Other processes on the host may mount
// elsewhere while the suite runs.)
func countMounts() int {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && (strings.Contains(f[4], "nsbox") || strings.HasPrefix(f[4], os.TempDir())) {
			n++
		}
	}
	return n
}

// leftBehind lists children of the test binary still alive (every sandbox
// init is one) and nsbox mounts added since the start. Other nsbox
// processes on the host (go test runs packages in parallel) are not ours
// (the engines' cgroup checks cover this suite's own runs).
func leftBehind(mountsBefore int) []string {
	var out []string
	if n := countMounts(); n != mountsBefore {
		out = append(out, fmt.Sprintf("nsbox-looking host mounts went from %d to %d", mountsBefore, n))
	}
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		if st, err := os.ReadFile(filepath.Join("/proc", d.Name(), "status")); err == nil && bytes.Contains(st, []byte("\nPPid:\t"+fmt.Sprint(os.Getpid())+"\n")) {
			out = append(out, "child process "+d.Name()+" of the test binary still running")
		}
	}
	return out
}
