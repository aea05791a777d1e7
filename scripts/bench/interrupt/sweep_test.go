package interrupt

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container"
)

// The sweep removes the bench's own cgroup trees in every hierarchy, with
// a process still running in one (killed), and nothing else: not a
// bench-shaped name it did not give out, nor a name of another shape.
func TestCgroups(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("requires root: the test makes cgroups")
	}
	dirs := Hierarchies()
	if len(dirs) == 0 {
		t.Skip("no cgroup hierarchy found")
	}
	mine, other := "nsbox-bench-t"+container.NewID()[:8], "nsbox-bench-u"+container.NewID()[:8]
	for _, d := range dirs {
		for _, sub := range []string{"sp-1", "pool-a/x", "zy-1"} {
			if err := os.MkdirAll(filepath.Join(d, mine, sub), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Mkdir(filepath.Join(d, other), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			os.Remove(filepath.Join(d, other))
			Tree(filepath.Join(d, mine))
		})
	}
	sleeper := exec.Command("sleep", "infinity")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill() })
	if err := os.WriteFile(filepath.Join(dirs[0], mine, "pool-a/x", "cgroup.procs"), []byte(strconv.Itoa(sleeper.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if left := Cgroups(dirs, []string{mine, "..", "nsbox-bench-../x"}, time.Minute); len(left) > 0 {
		t.Fatalf("left: %v", left)
	}
	var ee *exec.ExitError
	if err := sleeper.Wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("the process in the bench's cgroup: %v, want killed", err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, mine)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s/%s: %v, want it removed", d, mine, err)
		}
		if _, err := os.Stat(filepath.Join(d, other)); err != nil {
			t.Errorf("%s/%s, not the bench's: %v, want it left alone", d, other, err)
		}
	}
}
