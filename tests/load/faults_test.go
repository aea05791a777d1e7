package load

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/tests/internal/testdaemon"
)

// forkCells: a cell that forks (multiprocessing.Pool, a bare os.fork)
// works, and every next cell answers its own code: the children must not
// answer for the session or desynchronise it. So does a run.
func forkCells(ctx context.Context, cl *client.Client, rootfs string) error {
	res, err := cl.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Rootfs: rootfs,
		Code: "from multiprocessing import Pool\nwith Pool(2) as p:\n    print(p.map(abs, [-1, -2, -3]))"})
	if err != nil {
		return err
	}
	if res.Status != agentapi.StatusOK || res.Stdout != "[1, 2, 3]\n" {
		return fmt.Errorf("run with multiprocessing.Pool(2).map: %s stdout %q stderr %.300q", res.Status, res.Stdout, res.Stderr)
	}
	s, err := cl.CreateSession(ctx, &agentapi.SessionRequest{Rootfs: rootfs})
	if err != nil {
		return err
	}
	defer cl.DeleteSession(context.WithoutCancel(ctx), s.ID)
	for _, c := range []struct{ code, want string }{
		{"from multiprocessing import Pool\nwith Pool(2) as p:\n    r = p.map(abs, [-1, -2, -3])\nr", "[1, 2, 3]"},
		{"'second'", "'second'"},
		{"import os\npid = os.fork()\n'child' if pid == 0 else 'parent'", "'parent'"},
		{"'third'", "'third'"},
		{"import os\nif os.fork() == 0:\n    os._exit(0)\nos.wait()[1]", "0"},
		{"'fourth'", "'fourth'"},
	} {
		res, err := cl.Exec(ctx, s.ID, &agentapi.ExecRequest{Code: c.code})
		if err != nil {
			return fmt.Errorf("exec %q: %w", c.code, err)
		}
		if res.Status != agentapi.StatusOK || res.Value != c.want || strings.Contains(res.Stdout, "nsbox-end") {
			return fmt.Errorf("exec %q: %s value %q (want %q) stdout %.200q stderr %.300q", c.code, res.Status, res.Value, c.want, res.Stdout, res.Stderr)
		}
	}
	return nil
}

// forkInCell: forkCells, in sessions and runs on the test rootfs.
func (s *suite) forkInCell(t *testing.T, sc *scenario) {
	sc.start()
	cl, closeIdle := sc.client()
	defer closeIdle()
	for range s.scale.forks {
		sc.timed(func() error { return forkCells(context.Background(), cl, "") })
	}
}

// waitZygote waits until the daemon's first zygote is ready and is not
// the process old; it is slow to start on a busy host.
func waitZygote(t *testing.T, d *testdaemon.Daemon, old int) agentapi.ZygoteInfo {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		info, err := d.Client.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Zygotes) == 0 {
			t.Fatal("no zygote in /v1/info")
		}
		if z := info.Zygotes[0]; z.State == "ready" && z.Pid != old {
			return z
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready zygote after 3 minutes: %+v", info.Zygotes[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// zygote: on the data-science rootfs, where Python runs and sessions are
// zygote children: floods in a run and a cell, fork in a cell, then the
// zygote SIGKILLed while two clients run code: no request may fail, and a
// new zygote takes over each time.
func (s *suite) zygote(t *testing.T, sc *scenario) {
	name := testdaemon.DataSciRootfs(t)
	conf := filepath.Join(t.TempDir(), "nsbox.conf")
	// One zygote (no lean one): the one killed forks every run.
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("[zygote]\nrootfs = [%q]\nlean_modules = []\n", name)), 0o644); err != nil {
		t.Fatal(err)
	}
	d := sc.start("--config", conf, "--default-rootfs", name, "--max-concurrent", "3")
	sc.flood(floodPath{"zygote run", runFlood(&agentapi.RunRequest{Language: agentapi.LanguagePython, Code: pyFlood, Limits: floodLimits(0)})})
	sc.flood(floodPath{"zygote session", sessionFlood("")})
	cl, closeIdle := sc.client()
	defer closeIdle()
	sc.timed(func() error { return forkCells(context.Background(), cl, "") })

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bg, closeIdle := sc.client()
			defer closeIdle()
			for ctx.Err() == nil {
				sc.timed(func() error {
					res, err := retry429(func() (*agentapi.RunResult, error) {
						return bg.Run(context.Background(), &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: "print(6 * 7)"})
					})
					if err == nil && res.Stdout != "42\n" {
						err = fmt.Errorf("run during zygote kills: %s %q %s", res.Status, res.Stdout, res.Error)
					}
					return err
				})
			}
		}()
	}
	z := waitZygote(t, d, 0)
	var back []string
	for range s.scale.zygoteKills {
		time.Sleep(time.Second)
		if err := syscall.Kill(z.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		z = waitZygote(t, d, z.Pid)
		back = append(back, fmt.Sprintf("%.1f s", time.Since(t0).Seconds()))
	}
	time.Sleep(time.Second)
	cancel()
	wg.Wait()
	sc.row.note("zygote back after SIGKILL in %s", strings.Join(back, ", "))
	if z.Restarts != uint64(s.scale.zygoteKills) {
		t.Errorf("zygote restarts %d after %d kills", z.Restarts, s.scale.zygoteKills)
	}
}

// daemonKill: the daemon SIGKILLed with two runs and a session live; its
// sandboxes die with it, the next daemon on the same paths recovers what
// they left and serves runs.
func (s *suite) daemonKill(t *testing.T, sc *scenario) {
	d := sc.start()
	ctx := context.Background()
	cl, closeIdle := sc.client()
	defer closeIdle()
	sess, err := cl.CreateSession(ctx, &agentapi.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Exec(ctx, sess.ID, &agentapi.ExecRequest{Code: "x = 1"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	running := make(chan struct{}, 2) // one per run whose code runs in its sandbox
	for range 2 {
		wg.Add(1)
		go func() { // fails when the daemon dies: expected
			defer wg.Done()
			c, closeIdle := sc.client()
			defer closeIdle()
			once := sync.Once{}
			c.RunStream(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: "import time\nprint('running', flush=True)\ntime.sleep(60)"}, func(ev agentapi.Event) {
				if ev.Type == agentapi.EventStdout {
					once.Do(func() { running <- struct{}{} })
				}
			})
		}()
	}
	timeout := time.After(30 * time.Second)
	for range 2 {
		select {
		case <-running:
		case <-timeout:
			info, err := cl.Info(ctx)
			t.Fatalf("the two runs' code did not run in 30 s: %+v %v", info, err)
		}
	}
	old := testdaemon.Descendants(d.Pid())
	d.Kill(t)
	wg.Wait()
	logged := len(d.Log.String())
	t0 := time.Now()
	sc.restart()
	sc.row.note("answering again %d ms after SIGKILL", time.Since(t0).Milliseconds())
	if m := regexp.MustCompile(`recovered leftovers.* removed=(\d+)`).FindStringSubmatch(d.Log.String()[logged:]); m == nil || m[1] == "0" {
		t.Errorf("the restarted daemon did not remove the killed one's sandboxes: %q", m)
	} else {
		sc.row.note("the next daemon removed %s sandboxes", m[1])
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var alive []int
		for _, p := range old {
			if p.Alive() {
				alive = append(alive, p.Pid)
			}
		}
		if len(alive) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("processes of the killed daemon's sandboxes still alive: %v", alive)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cl2, closeIdle2 := sc.client()
	defer closeIdle2()
	for range 5 {
		sc.timed(func() error {
			res, err := cl2.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: "print('after')"})
			if err == nil && res.Stdout != "after\n" {
				err = fmt.Errorf("run after recovery: %s %q", res.Status, res.Stdout)
			}
			return err
		})
	}
}

// daemonStop: the daemon SIGSTOPped past the runs' deadlines while two
// runs (pooled and cold) sleep 2 s of their 10 s limit (8 s to spare for a
// slow start). Each finished before its deadline, so each is ok with its
// final output, whenever the daemon looked.
func (s *suite) daemonStop(t *testing.T, sc *scenario) {
	const deadline = 10 * time.Second
	d := sc.start("--max-concurrent", "2")
	ctx := context.Background()
	started := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for _, lim := range []*agentapi.Limits{{TimeoutMs: deadline.Milliseconds()}, {TimeoutMs: deadline.Milliseconds(), MemoryBytes: 300 << 20}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, closeIdle := sc.client()
			defer closeIdle()
			sc.timed(func() error {
				var once sync.Once
				res, err := cl.RunStream(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Limits: lim,
					Code: "import time\nprint('started', flush=True)\ntime.sleep(2)\nprint('done')"},
					func(ev agentapi.Event) {
						if ev.Type == agentapi.EventStdout {
							once.Do(func() { started <- struct{}{} })
						}
					})
				if err == nil && (res.Status != agentapi.StatusOK || !strings.HasSuffix(res.Stdout, "done\n")) {
					err = fmt.Errorf("a run that slept 2 s of its 10 s while the daemon was stopped: %s (pooled %v) stdout %q", res.Status, res.Pooled, res.Stdout)
				}
				return err
			})
		}()
	}
	for range 2 {
		select {
		case <-started:
		case <-time.After(time.Minute):
			t.Fatal("the runs did not start")
		}
	}
	pid := d.Pid()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(deadline + time.Second) // past both deadlines: each run had started
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	sc.row.note("stopped 5 s during two 2 s runs with a 3 s limit")
}
