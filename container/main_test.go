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
	mountsBefore := countMounts()
	code := m.Run()
	// After the whole suite nothing of nsbox may remain on the host.
	if leaks := leftovers(mountsBefore); len(leaks) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the suite left things behind:\n  %s\n", strings.Join(leaks, "\n  "))
		code = 1
	}
	os.Exit(code)
}

func countMounts() int {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	return bytes.Count(b, []byte("\n"))
}

// leftovers lists init processes still alive, children of the test binary
// and mounts added since the start. (Liveness locks are global to the host
// and other nsbox processes may hold some: the engines' cgroup checks cover
// this suite's own runs.)
func leftovers(mountsBefore int) []string {
	var out []string
	if n := countMounts(); n != mountsBefore {
		out = append(out, fmt.Sprintf("host mount count changed from %d to %d", mountsBefore, n))
	}
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && bytes.HasPrefix(b, []byte(initArg0+"\x00")) {
			out = append(out, "sandbox init process "+d.Name()+" still running")
		}
		if st, err := os.ReadFile(filepath.Join("/proc", d.Name(), "status")); err == nil && bytes.Contains(st, []byte("\nPPid:\t"+fmt.Sprint(os.Getpid())+"\n")) {
			out = append(out, "child process "+d.Name()+" of the test binary still running")
		}
	}
	return out
}
