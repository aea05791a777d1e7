package integration

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi/client"
)

// testRootfs returns the rootfs store and name the tests run on
// (NSBOX_TEST_ROOTFS_STORE, NSBOX_TEST_ROOTFS), skipping when absent.
func testRootfs(t *testing.T) (store, name string) {
	t.Helper()
	store = os.Getenv("NSBOX_TEST_ROOTFS_STORE")
	if store == "" {
		store = "/var/lib/nsbox/rootfs"
	}
	name = os.Getenv("NSBOX_TEST_ROOTFS_NAME")
	if name == "" {
		name = "minimal"
	}
	if _, err := os.Stat(filepath.Join(store, name, "rootfs")); err != nil {
		t.Skipf("requires the rootfs %q in %s (build it with `nsbox rootfs build --name %s`, or set NSBOX_TEST_ROOTFS_STORE/NSBOX_TEST_ROOTFS_NAME): %v", name, store, name, err)
	}
	return store, name
}

func randomName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// lockedBuffer collects a daemon's log.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// daemon is a running `nsbox daemon`.
type daemon struct {
	cmd        *exec.Cmd
	args       []string
	sock       string
	runDir     string
	cgroupName string
	client     *client.Client
	http       *http.Client
	log        *lockedBuffer
	exited     chan struct{}
	exitErr    error
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
	store, name := testRootfs(t)
	tmp := t.TempDir()
	d := &daemon{
		sock:       cmp.Or(sock, filepath.Join(tmp, "s.sock")),
		runDir:     cmp.Or(runDir, filepath.Join(tmp, "run")),
		cgroupName: randomName("nsbox-it-"),
	}
	d.args = append([]string{"daemon", "--socket", d.sock, "--state-dir", filepath.Join(tmp, "state"), "--run-dir", d.runDir,
		"--rootfs-store", store, "--default-rootfs", name, "--cgroup-name", d.cgroupName, "--log-level", "debug",
		// No warm pool or spare inits unless a test asks (its own flags win):
		// pooled sandboxes and spares are alive by design, not leftovers.
		"--pool-size", "0", "--spare-inits", "0"}, extra...)
	d.client = &client.Client{Socket: d.sock}
	var dl net.Dialer
	d.http = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return dl.DialContext(ctx, "unix", d.sock)
	}}}
	d.log = &lockedBuffer{}
	d.start(t)
	t.Cleanup(func() {
		d.kill(t)
		<-d.exited
		d.removeCgroups(t)
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.log)
		}
	})
	return d
}

// start (re)starts the daemon process and waits until its socket answers.
func (d *daemon) start(t *testing.T) {
	t.Helper()
	d.cmd = exec.Command(nsboxBin, d.args...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d.exited = make(chan struct{})
	go func() { d.exitErr = d.cmd.Wait(); close(d.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := d.client.Health(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-d.exited:
			t.Fatalf("daemon exited at start: %v\n%s", d.exitErr, d.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon did not answer on %s: %v\n%s", d.sock, err, d.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// signal sends sig and waits for the daemon to exit, returning its error.
func (d *daemon) signal(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	<-d.exited
	return d.exitErr
}

func (d *daemon) kill(t *testing.T) {
	t.Helper()
	select {
	case <-d.exited:
	default:
		_ = d.signal(t, syscall.SIGKILL)
	}
}

// waitIdle polls /v1/info until no run is in flight, queued or being torn
// down: the
// daemon answers a run's client before the run is torn down when the client
// has gone.
func (d *daemon) waitIdle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := d.client.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.InFlight == 0 && info.Queued == 0 && info.TearingDown == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon still has %d runs in flight, %d queued", info.InFlight, info.Queued)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
// cgroupParents lists the daemon's cgroup parent (<own cgroup>/<name>) in
// every hierarchy this test process belongs to.
func (d *daemon) cgroupParents(t *testing.T) []string {
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
			parent := filepath.Join(b, parts[2], d.cgroupName)
			if st, err := os.Stat(parent); err == nil && st.IsDir() {
				parents = append(parents, parent)
			}
		}
	}
	return parents
}

func (d *daemon) leftoverCgroups(t *testing.T) []string {
	t.Helper()
	var left []string
	for _, parent := range d.cgroupParents(t) {
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

// removeCgroups removes what a SIGKILLed daemon could not: its (by then
// empty, the sandboxes die with their daemon) sandbox cgroups, their
// liveness lock files and its cgroup parent, so test runs leave nothing
// on the host.
func (d *daemon) removeCgroups(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, parent := range d.cgroupParents(t) {
		for {
			ents, _ := os.ReadDir(parent)
			for _, e := range ents {
				if e.IsDir() && syscall.Rmdir(filepath.Join(parent, e.Name())) == nil {
					removeFreeLock(filepath.Join(d.runDir, "locks", "sandbox-"+e.Name()+".lock"))
				}
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

// removeFreeLock deletes a sandbox's liveness lock file unless someone
// holds it: a SIGKILLed daemon leaves those of its live sandboxes.
func removeFreeLock(path string) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
		os.Remove(path)
	}
}

// leftoverMounts lists mount points under the daemon's run dir.
func (d *daemon) leftoverMounts(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], d.runDir+"/") {
			left = append(left, f[4])
		}
	}
	return left
}

// leftoverPaths lists paths under the run dir and the engine's lock dir
// that name one of ids.
func (d *daemon) leftoverPaths(ids ...string) []string {
	var left []string
	for _, root := range []string{d.runDir, "/run/nsbox/locks"} {
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
	case <-d.exited:
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
