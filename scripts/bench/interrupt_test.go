package bench

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/nsbox/nsbox/scripts/bench/benchd"
	"github.com/nsbox/nsbox/scripts/bench/interrupt"
)

// fakeDaemonEnv makes the test binary a fake private daemon (TestMain):
// it makes the cgroup directories named in the variable (':'-separated),
// says "ready", and at SIGTERM removes the first and exits 0, as a daemon
// removes its cgroups; the rest it leaves, as a daemon killed mid-way would.
const fakeDaemonEnv = "NSBOX_BENCH_FAKE_DAEMON"

func TestMain(m *testing.M) {
	if dirs := os.Getenv(fakeDaemonEnv); dirs != "" {
		fakeDaemon(filepath.SplitList(dirs))
	}
	os.Exit(m.Run())
}

func fakeDaemon(dirs []string) {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			os.Exit(3)
		}
	}
	os.Stdout.WriteString("ready\n")
	<-term
	if os.Remove(dirs[0]) != nil {
		os.Exit(4)
	}
	os.Exit(0)
}

// requireCgroups skips unless the test can make cgroups of its own.
func requireCgroups(t *testing.T) []string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("requires root: the test makes cgroups")
	}
	dirs := interrupt.Hierarchies()
	if len(dirs) == 0 {
		t.Skip("no cgroup hierarchy found")
	}
	return dirs
}

// An interrupt stops a private daemon with SIGTERM (it exits 0, having
// removed what it removes), sweeps the empty cgroup it left, and refuses
// daemons that start after it. (The interrupt is once per process: this
// package's one test of it.)
func TestInterruptStopsDaemons(t *testing.T) {
	dirs := requireCgroups(t)
	name := interrupt.Name()
	removed, leftover := filepath.Join(dirs[0], name, "pool-1"), filepath.Join(dirs[0], name, "zy-1")
	d := &benchd.Daemon{Cmd: exec.Command(os.Args[0], "-test.run=^$")}
	d.Cmd.Env = append(os.Environ(), fakeDaemonEnv+"="+removed+string(filepath.ListSeparator)+leftover)
	out, err := d.Cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Cmd.Process.Kill(); interrupt.Tree(filepath.Join(dirs[0], name)) })
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("fake daemon: %q, %v", line, err)
	}
	if err := interrupt.Track(d); err != nil {
		t.Fatal(err)
	}
	if left := interrupt.Run(); len(left) > 0 {
		t.Fatalf("left: %v", left)
	}
	if st := d.Cmd.ProcessState; st == nil || st.ExitCode() != 0 {
		t.Fatalf("the daemon: %v, want it to have exited 0 at SIGTERM", st)
	}
	if _, err := os.Stat(filepath.Join(dirs[0], name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the daemon's cgroup parent: %v, want it swept", err)
	}
	if err := interrupt.Track(&benchd.Daemon{}); !errors.Is(err, interrupt.ErrInterrupted) {
		t.Errorf("a daemon started after the interrupt: %v, want ErrInterrupted", err)
	}
}
