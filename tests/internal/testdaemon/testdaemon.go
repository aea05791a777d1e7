// Package testdaemon builds nsbox and runs private daemons for the
// end-to-end tests (tests/integration, tests/soak, tests/load): each on a
// temp socket, run dir and state dir and a cgroup name of its own, so that
// what a test finds left behind is its own daemon's.
package testdaemon

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/tests/testenv"
)

// Build is testenv.Build: nsbox and nsbox-init built into dir from the
// module at root.
func Build(root, dir string) (string, error) { return testenv.Build(root, dir) }

// Rootfs is testenv.Rootfs: the rootfs store and name the tests run on,
// skipping when absent.
func Rootfs(t testing.TB) (store, name string) {
	t.Helper()
	return testenv.Rootfs(t)
}

// DataSciRootfs names the data-science rootfs in the store
// (NSBOX_TEST_DATASCI_ROOTFS_NAME, default "default"), skipping when it
// is not there.
func DataSciRootfs(t testing.TB) string {
	t.Helper()
	store, _ := Rootfs(t)
	name := envOr("NSBOX_TEST_DATASCI_ROOTFS_NAME", "default")
	if _, err := os.Stat(filepath.Join(store, name, "rootfs/usr/lib/python3/dist-packages/pandas")); err != nil {
		t.Skipf("requires the data-science rootfs %q with pandas and matplotlib in %s (build it: nsbox rootfs build --profile default --name %s): %v", name, store, name, err)
	}
	return name
}

// PolyglotRootfs returns the name of the polyglot rootfs (R and Java;
// NSBOX_TEST_POLYGLOT_ROOTFS_NAME, default "polyglot") when the test store
// has it, else "": the tests of R and Java skip (make rootfs-polyglot).
func PolyglotRootfs(t testing.TB) string {
	t.Helper()
	store, _ := Rootfs(t)
	name := envOr("NSBOX_TEST_POLYGLOT_ROOTFS_NAME", "polyglot")
	for _, f := range []string{"usr/bin/Rscript", "usr/bin/jshell"} {
		if _, err := os.Lstat(filepath.Join(store, name, "rootfs", f)); err != nil {
			t.Logf("no polyglot rootfs %q with R and Java in %s: its tests skip (make rootfs-polyglot)", name, store)
			return ""
		}
	}
	return name
}

// envOr is the variable k's value, def when it is unset or empty.
func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// RandomName returns prefix and eight random hex digits.
func RandomName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// LockedBuffer collects a daemon's log.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Daemon is a private `nsbox daemon`. Start (re)starts it; the fields
// that name its process change with every start.
type Daemon struct {
	Bin        string
	Args       []string
	Sock       string
	RunDir     string
	CgroupName string
	Client     *client.Client
	HTTP       *http.Client // plain HTTP on the socket
	Log        *LockedBuffer

	Cmd     *exec.Cmd
	Exited  chan struct{} // closed when the process has exited
	ExitErr error         // its exit, once Exited is closed
}

// New describes a daemon of bin on paths under a new temp dir and a cgroup
// name starting with prefix; extra flags follow the path flags (a later
// flag wins). It does not start it. At cleanup the daemon is SIGKILLed if
// it still runs and whatever cgroups it left are removed; its log is
// printed if the test failed.
func New(t testing.TB, bin, prefix string, extra ...string) *Daemon {
	t.Helper()
	store, name := Rootfs(t)
	tmp := t.TempDir()
	d := &Daemon{
		Bin:        bin,
		Sock:       filepath.Join(tmp, "s.sock"),
		RunDir:     filepath.Join(tmp, "run"),
		CgroupName: RandomName(prefix),
		Log:        &LockedBuffer{},
	}
	d.Args = append([]string{"daemon", "--socket", d.Sock, "--state-dir", filepath.Join(tmp, "state"), "--run-dir", d.RunDir,
		"--rootfs-store", store, "--default-rootfs", name, "--cgroup-name", d.CgroupName}, extra...)
	d.Client = &client.Client{Socket: d.Sock}
	var dl net.Dialer
	d.HTTP = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return dl.DialContext(ctx, "unix", d.Sock)
	}}}
	t.Cleanup(func() {
		if d.Cmd == nil {
			return
		}
		d.Kill(t)
		RemoveCgroups(t, d.CgroupName, d.RunDir)
		if t.Failed() {
			t.Logf("daemon log (tail):\n%s", tail(d.Log.String(), 8000))
		}
	})
	return d
}

// At serves the daemon's socket at sock and keeps its state in runDir
// ("" keeps the temp dir's), before it starts.
func (d *Daemon) At(sock, runDir string) {
	if sock != "" {
		d.Sock = sock
		d.Client = &client.Client{Socket: sock}
		d.Args = append(d.Args, "--socket", sock)
	}
	if runDir != "" {
		d.RunDir = runDir
		d.Args = append(d.Args, "--run-dir", runDir)
	}
}

// Start (re)starts the daemon process and waits until its socket answers.
func (d *Daemon) Start(t testing.TB) {
	t.Helper()
	d.Cmd = exec.Command(d.Bin, d.Args...)
	d.Cmd.Stdout, d.Cmd.Stderr = d.Log, d.Log
	if err := d.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d.Exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { d.ExitErr = cmd.Wait(); close(exited) }(d.Cmd, d.Exited)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := d.Client.Health(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-d.Exited:
			t.Fatalf("daemon exited at start: %v\n%s", d.ExitErr, d.Log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon did not answer on %s: %v\n%s", d.Sock, err, d.Log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Pid is the daemon process's pid.
func (d *Daemon) Pid() int { return d.Cmd.Process.Pid }

// Signal sends sig and waits for the daemon to exit, returning its error.
func (d *Daemon) Signal(t testing.TB, sig syscall.Signal) error {
	t.Helper()
	if err := d.Cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	<-d.Exited
	return d.ExitErr
}

// Kill SIGKILLs the daemon unless it has exited.
func (d *Daemon) Kill(t testing.TB) {
	t.Helper()
	select {
	case <-d.Exited:
	default:
		_ = d.Signal(t, syscall.SIGKILL)
	}
}

// WaitIdle polls /v1/info until no run is in flight, queued or being torn
// down: the daemon answers a run's client before the run is torn down
// when the client has gone.
func (d *Daemon) WaitIdle(t testing.TB) {
	t.Helper()
	d.waitInfo(t, 30*time.Second, false)
}

// Settle waits until no run is in flight, no session lives, every pool is
// full and every zygote is up (or unused): the state to compare leak
// counts in. A zygote takes long to start on a busy host.
func (d *Daemon) Settle(t testing.TB) {
	t.Helper()
	d.waitInfo(t, 3*time.Minute, true)
	time.Sleep(300 * time.Millisecond) // background teardowns of pooled runs
}

func (d *Daemon) waitInfo(t testing.TB, limit time.Duration, settled bool) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(limit)
	for {
		info, err := d.Client.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ok := info.InFlight == 0 && info.Queued == 0 && info.TearingDown == 0
		if ok && settled {
			ss, err := d.Client.Sessions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ok = len(ss) == 0
			for _, p := range info.Pools {
				ok = ok && p.Ready == p.Size && p.Spawning == 0
			}
			for _, z := range info.Zygotes {
				ok = ok && (z.State == "ready" || z.State == "unused")
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon not idle after %s: %d in flight, %d queued, %d tearing down, pools %+v, zygotes %+v",
				limit, info.InFlight, info.Queued, info.TearingDown, info.Pools, info.Zygotes)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Metrics returns the daemon's /metrics samples without labels (such as
// go_goroutines, process_open_fds, process_resident_memory_bytes).
func (d *Daemon) Metrics(t testing.TB) map[string]float64 {
	t.Helper()
	resp, err := d.HTTP.Get("http://nsbox/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			m[f[0]] = v
		}
	}
	return m
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
