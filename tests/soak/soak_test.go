// Package soak drives a real nsbox daemon with many mixed requests and
// checks that it leaks nothing: cgroups, mounts, run-dir entries, child
// processes, file descriptors or goroutines. It runs only when
// NSBOX_SOAK_RUNS is set (make soak); it needs root and a built rootfs.
package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
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
	"github.com/nsbox/nsbox/tests/internal/testdaemon"
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
	d.Settle(t)
	start := takeSnapshot(t, d)
	t.Logf("start: %+v (pool ready %d)", start, poolReady(t, d))

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
			cl := &client.Client{Socket: d.Sock}
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
	t.Logf("%d requests at concurrency %d in %s (%.1f/s); load %s", n, conc, took.Round(time.Millisecond), float64(n)/took.Seconds(), testdaemon.LoadAvg())
	for _, k := range kinds {
		t.Logf("  %-13s %6d  failed %d", k.name, counts[k.name], failures[k.name])
	}
	for name, err := range firstErr {
		t.Errorf("%s: %d failed; first: %v", name, failures[name], err)
	}
	info, _ := d.Client.Info(ctx)
	for _, p := range info.Pools {
		t.Logf("pool %s: hits %d misses %d refills %d (mean %.1f ms) discarded %d failures %d", p.Name, p.Hits, p.Misses, p.Refills, p.MeanRefillMs, p.Discarded, p.Failures)
	}
	for _, z := range info.Zygotes {
		t.Logf("zygote on %s (lean %v): %s, forks %d fallbacks %d restarts %d %s", z.Rootfs, z.Lean, z.State, z.Forks, z.Fallbacks, z.Restarts, z.LastError)
		if z.State == "ready" && (z.Fallbacks > 0 || z.Restarts > 0) {
			t.Errorf("zygote on %s: %d runs fell back to cold, %d restarts (last error %q)", z.Rootfs, z.Fallbacks, z.Restarts, z.LastError)
		}
	}

	// Nothing may be left beyond the starting state once the daemon is
	// idle again and the pool is full.
	deadline := time.Now().Add(time.Minute)
	var end snapshot
	for {
		d.Settle(t)
		end = takeSnapshot(t, d)
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

	if err := d.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-d.Exited
	if c := testdaemon.LeftoverCgroups(t, d.CgroupName); len(c) > 0 {
		t.Errorf("cgroups left after the daemon exited: %q", c)
	}
	if m := testdaemon.Mounts(t, d.RunDir); len(m) > 0 {
		t.Errorf("mounts left under %s: %q", d.RunDir, m)
	}
}

// startDaemon starts the daemon with one run slot more than the soak's
// concurrency, so that the pool keeps refilling (it pauses while every
// slot is busy) and most Python runs and sessions are pooled.
func startDaemon(t *testing.T, conc int) *testdaemon.Daemon {
	t.Helper()
	testdaemon.Rootfs(t)
	bin, err := testdaemon.Build(filepath.Join("..", ".."), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := testdaemon.New(t, bin, "nsbox-soak-", "--queue", "64", "--max-sessions", "64",
		"--max-concurrent", strconv.Itoa(conc+1), "--log-level", "warn")
	d.Start(t)
	return d
}

func poolReady(t *testing.T, d *testdaemon.Daemon) int {
	t.Helper()
	info, err := d.Client.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range info.Pools {
		n += p.Ready
	}
	return n
}

func takeSnapshot(t *testing.T, d *testdaemon.Daemon) snapshot {
	t.Helper()
	m := d.Metrics(t)
	ents, _ := os.ReadDir(d.RunDir)
	return snapshot{
		goroutines: int(m["go_goroutines"]),
		fds:        int(m["process_open_fds"]),
		children:   testdaemon.Children(d.Pid()),
		cgroups:    len(testdaemon.LeftoverCgroups(t, d.CgroupName)),
		mounts:     len(testdaemon.Mounts(t, d.RunDir)),
		runDir:     len(ents),
	}
}
