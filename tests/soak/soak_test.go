// Package soak drives a real nsbox daemon with many mixed requests and
// checks that it leaks nothing: cgroups, mounts, run-dir entries, child
// processes, file descriptors or goroutines. It runs only when
// NSBOX_SOAK_RUNS is set (make soak); it needs root and a built rootfs.
package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/container"
)

// kind is one sort of request in the mix.
type kind struct {
	name   string
	weight int
	do     func(ctx context.Context, cl *client.Client) error
}

func runExpect(req *agentapi.RunRequest, status string, stdout string) func(context.Context, *client.Client) error {
	return func(ctx context.Context, cl *client.Client) error {
		res, err := cl.Run(ctx, req)
		if err != nil {
			return err
		}
		if res.Status != status || !strings.Contains(res.Stdout, stdout) {
			return fmt.Errorf("status %q stdout %.200q error %q, want %q with %q", res.Status, res.Stdout, res.Error, status, stdout)
		}
		return nil
	}
}

func py(code string, lim *agentapi.Limits) *agentapi.RunRequest {
	return &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: code, Limits: lim}
}

func session(ctx context.Context, cl *client.Client) error {
	s, err := cl.CreateSession(ctx, &agentapi.SessionRequest{Files: []agentapi.File{{Path: "n.txt", Text: "1"}}})
	if err != nil {
		return err
	}
	defer cl.DeleteSession(context.WithoutCancel(ctx), s.ID)
	for i, code := range []string{"x = int(open('n.txt').read())", "x += 1", "x * 10"} {
		res, err := cl.Exec(ctx, s.ID, &agentapi.ExecRequest{Code: code})
		if err != nil {
			return err
		}
		if res.Status != agentapi.StatusOK || (i == 2 && res.Value != "20") {
			return fmt.Errorf("session exec %q: status %s value %q", code, res.Status, res.Value)
		}
	}
	return nil
}

func mix() []kind {
	return []kind{
		{"python ok", 50, runExpect(&agentapi.RunRequest{Language: agentapi.LanguagePython, Code: "print(sum(range(1000)), open('in.txt').read())",
			Files: []agentapi.File{{Path: "in.txt", Text: "in"}}}, agentapi.StatusOK, "499500 in")},
		{"shell ok", 10, runExpect(&agentapi.RunRequest{Argv: []string{"sh", "-c", "echo shell; sleep 0.01 &"}}, agentapi.StatusOK, "shell")},
		{"exception", 5, runExpect(py("1/0", nil), agentapi.StatusException, "")},
		{"timeout", 5, runExpect(py("while True: pass", &agentapi.Limits{TimeoutMs: 300}), agentapi.StatusTimeout, "")},
		{"oom", 5, runExpect(py("x = []\nwhile True: x.append(bytearray(1 << 20))", &agentapi.Limits{MemoryBytes: 64 << 20}), agentapi.StatusOOM, "")},
		{"output flood", 5, runExpect(py("while True: print('y' * 4096)", &agentapi.Limits{TimeoutMs: 1000, OutputBytes: 64 << 10}), agentapi.StatusOutputLimit, "yyyy")},
		{"shell flood", 5, runExpect(&agentapi.RunRequest{Argv: []string{"sh", "-c", "yes"}, Limits: &agentapi.Limits{OutputBytes: 64 << 10}}, agentapi.StatusOutputLimit, "y")},
		{"session", 15, session},
	}
}

// snapshot is what must not grow.
type snapshot struct {
	goroutines, fds, children, cgroups, mounts, runDir int
}

func TestSoak(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("NSBOX_SOAK_RUNS"))
	if n <= 0 {
		t.Skip("set NSBOX_SOAK_RUNS (make soak) to run the soak test")
	}
	if os.Geteuid() != 0 {
		t.Skip("requires root: the daemon runs sandboxes")
	}
	conc, _ := strconv.Atoi(os.Getenv("NSBOX_SOAK_CONCURRENCY"))
	if conc <= 0 {
		conc = 8
	}
	d := startDaemon(t, conc)
	ctx := context.Background()
	d.settle(t)
	start := d.snapshot(t)
	t.Logf("start: %+v (pool ready %d)", start, d.poolReady(t))

	kinds := mix()
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	var (
		next     atomic.Int64
		mu       sync.Mutex
		failures = map[string]int{}
		counts   = map[string]int{}
		firstErr = map[string]error{}
		wg       sync.WaitGroup
	)
	t0 := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := &client.Client{Socket: d.sock}
			for next.Add(1) <= int64(n) {
				r := rand.IntN(total)
				k := kinds[0]
				for _, k = range kinds {
					if r < k.weight {
						break
					}
					r -= k.weight
				}
				err := k.do(ctx, cl)
				var ae *agentapi.Error
				for errors.As(err, &ae) && ae.Status == http.StatusTooManyRequests {
					time.Sleep(5 * time.Millisecond)
					err = k.do(ctx, cl)
				}
				mu.Lock()
				counts[k.name]++
				if err != nil {
					failures[k.name]++
					if firstErr[k.name] == nil {
						firstErr[k.name] = err
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	took := time.Since(t0)
	t.Logf("%d requests at concurrency %d in %s (%.1f/s); load %s", n, conc, took.Round(time.Millisecond), float64(n)/took.Seconds(), loadavg())
	for _, k := range kinds {
		t.Logf("  %-13s %6d  failed %d", k.name, counts[k.name], failures[k.name])
	}
	for name, err := range firstErr {
		t.Errorf("%s: %d failed; first: %v", name, failures[name], err)
	}
	info, _ := d.client.Info(ctx)
	for _, p := range info.Pools {
		t.Logf("pool %s: hits %d misses %d refills %d (mean %.1f ms) discarded %d failures %d", p.Name, p.Hits, p.Misses, p.Refills, p.MeanRefillMs, p.Discarded, p.Failures)
	}
	for _, z := range info.Zygotes {
		t.Logf("zygote on %s: %s, forks %d fallbacks %d restarts %d %s", z.Rootfs, z.State, z.Forks, z.Fallbacks, z.Restarts, z.LastError)
		if z.State == "ready" && (z.Fallbacks > 0 || z.Restarts > 0) {
			t.Errorf("zygote on %s: %d runs fell back to cold, %d restarts (last error %q)", z.Rootfs, z.Fallbacks, z.Restarts, z.LastError)
		}
	}

	// Nothing may be left beyond the starting state once the daemon is
	// idle again and the pool is full.
	deadline := time.Now().Add(time.Minute)
	var end snapshot
	for {
		d.settle(t)
		end = d.snapshot(t)
		if end.goroutines <= start.goroutines && end.fds <= start.fds && end.children <= start.children &&
			end.cgroups <= start.cgroups && end.mounts <= start.mounts && end.runDir <= start.runDir {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("leak: start %+v, end %+v", start, end)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("end:   %+v", end)

	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-d.exited
	if c := d.cgroups(t); len(c) > 0 {
		t.Errorf("cgroups left after the daemon exited: %q", c)
	}
	if m := d.mounts(t); m > 0 {
		t.Errorf("%d mounts left under %s", m, d.runDir)
	}
}

// daemon is a running `nsbox daemon`.
type daemon struct {
	cmd        *exec.Cmd
	sock       string
	runDir     string
	cgroupName string
	client     *client.Client
	metrics    *http.Client
	exited     chan struct{}
}

// startDaemon starts the daemon with one run slot more than the soak's
// concurrency, so that the pool keeps refilling (it pauses while every
// slot is busy) and most Python runs and sessions are pooled.
func startDaemon(t *testing.T, conc int) *daemon {
	t.Helper()
	store := os.Getenv("NSBOX_TEST_ROOTFS_STORE")
	if store == "" {
		store = "/var/lib/nsbox/rootfs"
	}
	name := os.Getenv("NSBOX_TEST_ROOTFS_NAME")
	if name == "" {
		name = "minimal"
	}
	if _, err := os.Stat(filepath.Join(store, name, "rootfs")); err != nil {
		t.Skipf("requires the rootfs %q in %s (nsbox rootfs build --name %s): %v", name, store, name, err)
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "nsbox")
	build := exec.Command("go", "build", "-o", bin, "./cmd/nsbox")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	d := &daemon{sock: filepath.Join(tmp, "s.sock"), runDir: filepath.Join(tmp, "run"), cgroupName: "nsbox-soak-" + container.NewID()[:8]}
	log, err := os.Create(filepath.Join(tmp, "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(bin, "daemon", "--socket", d.sock, "--state-dir", filepath.Join(tmp, "state"), "--run-dir", d.runDir,
		"--rootfs-store", store, "--default-rootfs", name, "--cgroup-name", d.cgroupName, "--queue", "64", "--max-sessions", "64", "--max-concurrent", strconv.Itoa(conc+1), "--log-level", "warn")
	d.cmd.Stdout, d.cmd.Stderr = log, log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d.exited = make(chan struct{})
	go func() { d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			d.cmd.Process.Kill()
			<-d.exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("daemon log (tail):\n%s", tail(string(b), 4000))
		}
	})
	d.client = &client.Client{Socket: d.sock}
	var dl net.Dialer
	d.metrics = &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return dl.DialContext(ctx, "unix", d.sock)
	}}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := d.client.Health(context.Background()); err == nil {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatal("daemon did not answer")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

func (d *daemon) poolReady(t *testing.T) int {
	t.Helper()
	info, err := d.client.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range info.Pools {
		n += p.Ready
	}
	return n
}

// settle waits until no run is in flight, no session lives, every pool
// is full and every zygote is up (or unused).
func (d *daemon) settle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		info, err := d.client.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ss, err := d.client.Sessions(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		full := true
		for _, p := range info.Pools {
			full = full && p.Ready == p.Size && p.Spawning == 0
		}
		for _, z := range info.Zygotes {
			full = full && (z.State == "ready" || z.State == "unused")
		}
		if info.InFlight == 0 && info.Queued == 0 && info.TearingDown == 0 && len(ss) == 0 && full {
			time.Sleep(300 * time.Millisecond) // background teardowns of pooled runs
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon not idle: %+v, %d sessions", info, len(ss))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (d *daemon) snapshot(t *testing.T) snapshot {
	t.Helper()
	resp, err := d.metrics.Get("http://nsbox/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var s snapshot
	for _, line := range strings.Split(string(body), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "go_goroutines":
			s.goroutines = int(v)
		case "process_open_fds":
			s.fds = int(v)
		}
	}
	s.children = children(d.cmd.Process.Pid)
	s.cgroups = len(d.cgroups(t))
	s.mounts = d.mounts(t)
	ents, _ := os.ReadDir(d.runDir)
	s.runDir = len(ents)
	return s
}

// children counts the processes whose parent is pid.
func children(pid int) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			n++
		}
	}
	return n
}

// cgroups lists the sandbox cgroups under the daemon's cgroup name in
// every hierarchy this process is in.
func (d *daemon) cgroups(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		bases := []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}
		if parts[1] != "" {
			bases = nil
			for _, c := range strings.Split(parts[1], ",") {
				bases = append(bases, filepath.Join("/sys/fs/cgroup", strings.TrimPrefix(c, "name=")))
			}
			bases = append(bases, filepath.Join("/sys/fs/cgroup", parts[1]))
		}
		for _, b := range bases {
			parent := filepath.Join(b, parts[2], d.cgroupName)
			if seen[parent] {
				continue
			}
			seen[parent] = true
			ents, err := os.ReadDir(parent)
			if err != nil {
				continue
			}
			for _, e := range ents {
				if e.IsDir() {
					out = append(out, filepath.Join(parent, e.Name()))
				}
			}
		}
	}
	return out
}

// mounts counts mount points under the daemon's run dir.
func (d *daemon) mounts(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], d.runDir+"/") {
			n++
		}
	}
	return n
}
