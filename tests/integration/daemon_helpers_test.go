package integration

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/tests/internal/testdaemon"
)

// testRootfs returns the rootfs store and name the tests run on
// (NSBOX_TEST_ROOTFS_STORE, NSBOX_TEST_ROOTFS), skipping when absent.
func testRootfs(t *testing.T) (store, name string) {
	t.Helper()
	return testdaemon.Rootfs(t)
}

func randomName(prefix string) string { return testdaemon.RandomName(prefix) }

// lockedBuffer collects a daemon's log.
type lockedBuffer = testdaemon.LockedBuffer

// daemon is a running `nsbox daemon`: a testdaemon.Daemon under the
// names these tests use.
type daemon struct {
	*testdaemon.Daemon
	args       []string
	sock       string
	runDir     string
	cgroupName string
	client     *client.Client
	http       *http.Client
	log        *lockedBuffer
}

// startDaemon starts a daemon on temp paths and a unique cgroup name, waits
// until it answers and stops it (SIGKILL) at cleanup if still running.
func startDaemon(t *testing.T, extra ...string) *daemon {
	t.Helper()
	return startDaemonAt(t, "", "", extra...)
}

// startDaemonAt is startDaemon with the socket and run directory given
// ("" for the test's own).
func startDaemonAt(t *testing.T, sock, runDir string, extra ...string) *daemon {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("requires root: the daemon runs sandboxes")
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	td := testdaemon.New(t, nsboxBin, "nsbox-it-", append([]string{"--log-level", "debug",
		// No warm pool, spare inits or bare zygote unless a test asks (its
		// own flags win): they are alive by design, not leftovers.
		"--pool-size", "0", "--pool-node-size", "0", "--spare-inits", "0", "--zygote-bare=false"}, extra...)...)
	td.At(sock, runDir)
	d := &daemon{Daemon: td, args: td.Args, sock: td.Sock, runDir: td.RunDir, cgroupName: td.CgroupName,
		client: td.Client, http: td.HTTP, log: td.Log}
	d.start(t)
	return d
}

// start (re)starts the daemon process and waits until its socket answers.
func (d *daemon) start(t *testing.T) {
	t.Helper()
	d.Start(t)
}

// signal sends sig and waits for the daemon to exit, returning its error.
func (d *daemon) signal(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	return d.Signal(t, sig)
}

func (d *daemon) kill(t *testing.T) {
	t.Helper()
	d.Kill(t)
}

// waitIdle polls /v1/info until no run is in flight, queued or being torn
// down.
func (d *daemon) waitIdle(t *testing.T) {
	t.Helper()
	d.WaitIdle(t)
}

// waitGone polls until no process has marker in its command line or
// environment.
func waitGone(t *testing.T, marker string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		pids := processesWith(marker)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v with marker %q still alive", pids, marker)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func processesWith(marker string) []string {
	ents, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' || e.Name() == fmt.Sprint(os.Getpid()) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		environ, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && (bytes.Contains(cmdline, []byte(marker)) || bytes.Contains(environ, []byte(marker))) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// leftoverCgroups lists the sandbox cgroups under the daemon's cgroup
// parent in every hierarchy this process is in.
func (d *daemon) leftoverCgroups(t *testing.T) []string {
	t.Helper()
	return testdaemon.LeftoverCgroups(t, d.cgroupName)
}

// leftoverMounts lists mount points under the daemon's run dir.
func (d *daemon) leftoverMounts(t *testing.T) []string {
	t.Helper()
	return testdaemon.Mounts(t, d.runDir)
}

// leftoverPaths lists paths under the run dir and the engine's lock dir
// that name one of ids.
func (d *daemon) leftoverPaths(ids ...string) []string {
	var left []string
	for _, root := range []string{d.runDir, testdaemon.LockDir} {
		_ = filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			for _, id := range ids {
				if strings.Contains(e.Name(), id) {
					left = append(left, p)
				}
			}
			return nil
		})
	}
	return left
}

// assertClean fails when the daemon left cgroups, mounts or paths of ids.
func (d *daemon) assertClean(t *testing.T, ids ...string) {
	t.Helper()
	select {
	case <-d.Exited:
	default:
		// A run is answered before its sandbox is torn down; its slot
		// stays in flight until then.
		d.waitIdle(t)
	}
	if c := d.leftoverCgroups(t); len(c) > 0 {
		t.Errorf("leftover cgroups: %q", c)
	}
	if m := d.leftoverMounts(t); len(m) > 0 {
		t.Errorf("leftover mounts: %q", m)
	}
	if p := d.leftoverPaths(ids...); len(p) > 0 {
		t.Errorf("leftover paths: %q", p)
	}
}

func execNsbox(args ...string) *exec.Cmd { return exec.Command(nsboxBin, args...) }

// metric returns the value of an unlabelled metric from the daemon's
// /metrics ("" when it is not there).
// metricSum sums the values of the series whose line starts with prefix
// (a name and the first labels), as a decimal string; "" when there is none.
func (d *daemon) metricSum(t *testing.T, prefix string) string {
	t.Helper()
	var sum float64
	found := false
	for _, line := range strings.Split(metricsText(t, d), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum, found = sum+v, true
	}
	if !found {
		return ""
	}
	return strconv.FormatFloat(sum, 'f', -1, 64)
}

func (d *daemon) metric(t *testing.T, name string) string {
	t.Helper()
	for _, line := range strings.Split(metricsText(t, d), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}
