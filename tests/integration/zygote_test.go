package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
)

// waitInfo polls /v1/info until ok holds, for at most two minutes, and
// returns the info that satisfied it.
func (d *daemon) waitInfo(t *testing.T, what string, ok func(*agentapi.Info) bool) *agentapi.Info {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		info, err := d.client.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if ok(info) {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 2 minutes for %s: zygotes %+v, pools %+v", what, info.Zygotes, info.Pools)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeConf writes a daemon configuration file and returns its path.
func writeConf(t *testing.T, toml string) string {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "nsbox.conf")
	if err := os.WriteFile(conf, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	return conf
}

// checkForked fails t unless the zygotes served at least n runs and
// sessions and none fell back to a cold start.
func (d *daemon) checkForked(t *testing.T, n uint64) {
	t.Helper()
	if forks, fallbacks := d.zygoteForks(t); forks < n || fallbacks != 0 {
		t.Errorf("want at least %d zygote children and no fallback: %d and %d", n, forks, fallbacks)
	}
}

// zygoteForks sums the forks and fallbacks of every zygote (the main and
// the lean one of a rootfs).
func (d *daemon) zygoteForks(t *testing.T) (forks, fallbacks uint64) {
	t.Helper()
	info, err := d.client.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, z := range info.Zygotes {
		forks, fallbacks = forks+z.Forks, fallbacks+z.Fallbacks
	}
	return forks, fallbacks
}

// waitZygote polls /v1/info until the first zygote is ready and is not
// the process old (0: any).
func (d *daemon) waitZygote(t *testing.T, old int) agentapi.ZygoteInfo {
	t.Helper()
	info := d.waitInfo(t, "the zygote", func(info *agentapi.Info) bool {
		if len(info.Zygotes) == 0 {
			t.Fatal("no zygote in /v1/info")
		}
		z := info.Zygotes[0]
		return z.State == "ready" && z.Pid != old
	})
	return info.Zygotes[0]
}

// waitPoolForked polls /v1/info until the first zygote is ready and the
// first pool is full of its children.
func (d *daemon) waitPoolForked(t *testing.T) agentapi.PoolInfo {
	t.Helper()
	info := d.waitInfo(t, "a ready zygote and a pool full of its children", func(info *agentapi.Info) bool {
		if len(info.Zygotes) == 0 || len(info.Pools) == 0 {
			t.Fatal("no zygote or no pool in /v1/info")
		}
		p := info.Pools[0]
		return info.Zygotes[0].State == "ready" && p.Ready == p.Size && p.Forked == p.Size
	})
	return info.Pools[0]
}

// Through the daemon, Python runs and sessions on the data-science rootfs
// are zygote children: they start with the stack imported, they are as
// isolated as any run, a killed zygote is replaced while runs go on, and
// SIGTERM leaves nothing behind.
func TestZygoteThroughDaemon(t *testing.T) {
	name := dataSciRootfs(t)
	d := startDaemon(t, "--config", writeConf(t, fmt.Sprintf("[zygote]\nrootfs = [%q]\nchildren = 16\n", name)))
	ctx := context.Background()
	z := d.waitZygote(t, 0)
	if len(z.Skipped) != 0 || !strings.Contains(strings.Join(z.Modules, ","), "pandas") {
		t.Fatalf("zygote: %+v", z)
	}

	run := func(code string) *agentapi.RunResult {
		t.Helper()
		res, err := d.client.Run(ctx, &agentapi.RunRequest{Language: "python", Rootfs: name, Code: code})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := run("import sys, os\nprint('pandas' in sys.modules, os.getuid(), open('/proc/self/status').read().count('Seccomp:\\t2'))")
	if res.Status != agentapi.StatusOK || res.Stdout != "True 1000 1\n" {
		t.Fatalf("run: %+v", res)
	}
	res = run("import os, time\nos.system('sleep 30 &')\nx = bytearray(1 << 30)")
	if res.Status != agentapi.StatusOOM {
		t.Errorf("memory bomb on a zygote child: %s", res.Status)
	}

	id := newSession(t, d, &agentapi.SessionRequest{Rootfs: name, Limits: &agentapi.Limits{MemoryBytes: 1 << 30}})
	if r := execOK(t, d, id, "import sys\n'sklearn' in sys.modules"); r.Value != "True" {
		t.Errorf("session: sklearn not preimported: %+v", r)
	}
	if r := execOK(t, d, id, "import matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.show()"); len(r.Figures) != 1 || r.Stderr != "" {
		t.Errorf("session plot: %d figures, stderr %q", len(r.Figures), r.Stderr)
	}
	d.checkForked(t, 3)

	// The rootfs's lean zygote (numpy and pandas) takes a pandas cell; the
	// main one takes a cell that imports what only it holds.
	info, err := d.client.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Zygotes) != 2 || !info.Zygotes[1].Lean || info.Zygotes[1].State != "ready" {
		t.Fatalf("zygotes %+v, want the main one and a ready lean one", info.Zygotes)
	}
	mainForks, leanForks := info.Zygotes[0].Forks, info.Zygotes[1].Forks
	if res := run("import pandas, sys\nprint('scipy' in sys.modules)"); res.Stdout != "False\n" {
		t.Errorf("pandas cell: %+v, want it forked from the lean zygote (no scipy)", res)
	}
	if res := run("import sklearn, sys\nprint('scipy' in sys.modules)"); res.Stdout != "True\n" {
		t.Errorf("sklearn cell: %+v, want it forked from the main zygote", res)
	}
	if info, err = d.client.Info(ctx); err != nil {
		t.Fatal(err)
	}
	if info.Zygotes[0].Forks != mainForks+1 || info.Zygotes[1].Forks != leanForks+1 {
		t.Errorf("forks main %d -> %d, lean %d -> %d: want one each", mainForks, info.Zygotes[0].Forks, leanForks, info.Zygotes[1].Forks)
	}

	// A dead zygote: runs go on (cold), and a new zygote takes over.
	if err := syscall.Kill(z.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if res := run("print(6*7)"); res.Status != agentapi.StatusOK || res.Stdout != "42\n" {
		t.Fatalf("run after the zygote died: %+v", res)
	}
	z2 := d.waitZygote(t, z.Pid)
	if z2.Restarts != 1 {
		t.Errorf("restarts = %d", z2.Restarts)
	}
	if res := run("import scipy, sys\nprint('sklearn' in sys.modules)"); res.Stdout != "True\n" {
		t.Errorf("run on the new zygote: %+v", res)
	}
	if err := d.client.DeleteSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	d.waitIdle(t)

	// Only the zygote's own cgroup is left while the daemon runs, and
	// nothing once it has stopped.
	for _, c := range d.leftoverCgroups(t) {
		if !strings.HasPrefix(filepath.Base(c), "zy-") {
			t.Errorf("leftover cgroup %s", c)
		}
	}
	if err := d.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
	if c := d.leftoverCgroups(t); len(c) > 0 {
		t.Errorf("cgroups left after SIGTERM: %q", c)
	}
	if m := d.leftoverMounts(t); len(m) > 0 {
		t.Errorf("mounts left after SIGTERM: %q", m)
	}
}

// The first session after a daemon start has the zygote's imports: the
// pool fills with cold runners while the zygote starts (seconds on the
// data-science stack), and replaces them with its children once it is
// ready. So does a new zygote after the first one died.
func TestFirstSessionHasZygoteImports(t *testing.T) {
	name := dataSciRootfs(t)
	d := startDaemon(t, "--config", writeConf(t, fmt.Sprintf("[zygote]\nrootfs = [%q]\nchildren = 16\n\n[pools.ds]\nrootfs = %q\nsize = 2\n", name, name)))
	ctx := context.Background()
	firstSession := func() {
		t.Helper()
		p := d.waitPoolForked(t)
		t.Logf("pool: ready %d forked %d replaced %d refills %d", p.Ready, p.Forked, p.Replaced, p.Refills)
		sess, err := d.client.CreateSession(ctx, &agentapi.SessionRequest{Rootfs: name})
		if err != nil {
			t.Fatal(err)
		}
		defer d.client.DeleteSession(ctx, sess.ID)
		if !sess.Pooled {
			t.Fatalf("session %+v did not take a pooled runner", sess)
		}
		if r := execOK(t, d, sess.ID, "import sys\nprint('pandas' in sys.modules)"); r.Stdout != "True\n" {
			t.Fatalf("pandas in sys.modules before the session imported it: %q, want True", r.Stdout)
		}
		r := execOK(t, d, sess.ID, "import time\nt0 = time.perf_counter()\nimport pandas as pd\nprint(f'{(time.perf_counter() - t0) * 1000:.2f}')")
		t.Logf("import pandas as pd: %s ms in the cell, %d ms wall", strings.TrimSpace(r.Stdout), r.WallMs)
	}
	firstSession()

	z := d.waitZygote(t, 0)
	if err := syscall.Kill(z.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.waitZygote(t, z.Pid)
	firstSession()
}

// A SIGKILLed daemon takes its zygote and the zygote's children with it
// (the zygote's parent-death signal, then its pid namespace), and the next
// daemon removes their cgroups and starts a new zygote.
func TestZygoteDaemonSIGKILL(t *testing.T) {
	name := dataSciRootfs(t)
	d := startDaemon(t, "--config", writeConf(t, fmt.Sprintf("[zygote]\nrootfs = [%q]\nlean_modules = []\n", name)))
	z := d.waitZygote(t, 0)
	id := newSession(t, d, &agentapi.SessionRequest{Rootfs: name})
	if r := execOK(t, d, id, "import sys\n'pandas' in sys.modules"); r.Value != "True" {
		t.Fatalf("session: %+v", r)
	}
	before := d.leftoverCgroups(t)
	d.kill(t)
	deadline := time.Now().Add(time.Minute)
	for syscall.Kill(z.Pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("zygote %d outlived its daemon", z.Pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Every process of the old sandboxes is gone with it.
	for _, c := range before {
		if b, err := os.ReadFile(filepath.Join(c, "cgroup.procs")); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			t.Errorf("%s still has processes: %s", c, b)
		}
	}
	d.start(t)
	z2 := d.waitZygote(t, z.Pid)
	d.waitIdle(t)
	var zygotes []string
	for _, c := range d.leftoverCgroups(t) {
		if !strings.HasPrefix(filepath.Base(c), "zy-") {
			t.Errorf("leftover cgroup %s", c)
		}
		zygotes = append(zygotes, filepath.Base(c))
	}
	for _, c := range before {
		if _, err := os.Stat(c); err == nil && strings.HasPrefix(filepath.Base(c), "zy-") && z2.Pid != 0 {
			t.Errorf("the old zygote's cgroup %s survived the restart (now %v)", c, zygotes)
		}
	}
	if res, err := d.client.Run(context.Background(), &agentapi.RunRequest{Language: "python", Rootfs: name, Code: "import sys\nprint('sklearn' in sys.modules)"}); err != nil || res.Stdout != "True\n" {
		t.Errorf("run after recovery: %+v %v", res, err)
	}
}

// A zygote that dies under a run takes the run's sandbox with it (the
// child lives in the zygote's pid namespace). A run of which nothing has
// reached the caller yet is run again, cold or on the next zygote, and
// answers as if nothing had happened; a run whose output was already
// streamed is not run twice: it ends killed, and says why.
func TestZygoteDiesUnderARun(t *testing.T) {
	name := dataSciRootfs(t)
	// One zygote: the one killed forks every run.
	d := startDaemon(t, "--config", writeConf(t, fmt.Sprintf("[zygote]\nrootfs = [%q]\nlean_modules = []\n", name)))
	ctx := context.Background()
	z := d.waitZygote(t, 0)

	// killUnder kills the zygote once the run's cell is in its sleep,
	// seen from the host as a process carrying marker.
	killUnder := func(marker string) {
		deadline := time.Now().Add(time.Minute)
		for len(processesWith(marker)) == 0 {
			if time.Now().After(deadline) {
				t.Errorf("the run's cell never started its sleep (%s)", marker)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := syscall.Kill(z.Pid, syscall.SIGKILL); err != nil {
			t.Error(err)
		}
	}
	cell := func(marker, before string) string {
		return before + "import subprocess\nsubprocess.run(['/bin/sh', '-c', 'sleep 2; : " + marker + "'])\nprint(6 * 7)"
	}

	marker := "nsbox-it-rerun-" + container.NewID()
	go killUnder(marker)
	res, err := d.client.Run(ctx, &agentapi.RunRequest{Language: "python", Rootfs: name, Code: cell(marker, "")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentapi.StatusOK || res.Stdout != "42\n" {
		t.Fatalf("run under a dying zygote: %+v, want ok and 42 (run again)", res)
	}
	if got := d.metric(t, "nsbox_zygote_reruns_total"); got != "1" {
		t.Errorf("nsbox_zygote_reruns_total = %s, want 1", got)
	}
	waitGone(t, marker)

	z = d.waitZygote(t, z.Pid)
	marker = "nsbox-it-streamed-" + container.NewID()
	go killUnder(marker)
	var streamed strings.Builder
	res, err = d.client.RunStream(ctx, &agentapi.RunRequest{Language: "python", Rootfs: name, Code: cell(marker, "print('first', flush=True)\n")},
		func(ev agentapi.Event) {
			if ev.Type == agentapi.EventStdout {
				streamed.WriteString(ev.Data)
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentapi.StatusKilled || !strings.Contains(res.Error, "zygote") || streamed.String() != "first\n" {
		t.Errorf("streamed run under a dying zygote: %+v, streamed %q; want killed, the zygote named, and no second run", res, streamed.String())
	}
	if got := d.metric(t, "nsbox_zygote_reruns_total"); got != "1" {
		t.Errorf("nsbox_zygote_reruns_total = %s after a streamed run, want still 1", got)
	}
	waitGone(t, marker)
	d.waitZygote(t, z.Pid)
	d.waitIdle(t)
}

// A rootfs without the data-science stack (the test rootfs, minimal) gets
// a bare zygote: its Python runs, pooled or not, are zygote children,
// verified like every one (uid 1000, seccomp), with no fallback to a cold
// start; its /v1/info entry lists every module as skipped.
func TestBareZygoteOnMinimal(t *testing.T) {
	_, name := testRootfs(t)
	d := startDaemon(t, "--zygote-bare=true", "--pool-size", "2")
	z := d.waitZygote(t, 0)
	if z.Rootfs != name || len(z.Skipped) != len(z.Modules) || len(z.Modules) == 0 {
		t.Fatalf("zygote %+v: want a bare one on %s (every module skipped)", z, name)
	}
	d.waitPoolForked(t)
	ctx := context.Background()
	before := d.waitZygote(t, 0).Forks
	for _, lim := range []*agentapi.Limits{nil, {MemoryBytes: 200 << 20}} { // pooled, then a limit no pool has: forked on request
		res, err := d.client.Run(ctx, &agentapi.RunRequest{Language: "python", Code: "import os\nprint(os.getuid(), open('/proc/self/status').read().count('Seccomp:\\t2'))", Limits: lim})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != agentapi.StatusOK || res.Stdout != "1000 1\n" || res.Pooled != (lim == nil) {
			t.Errorf("run (limits %+v): %+v", lim, res)
		}
	}
	after := d.waitZygote(t, 0)
	if after.Forks < before+1 || after.Fallbacks != 0 {
		t.Errorf("zygote after a run forked on request: forks %d -> %d, fallbacks %d", before, after.Forks, after.Fallbacks)
	}
	d.waitIdle(t)
}

// Sessions beyond a zygote's children start cold, and the daemon says so:
// /v1/info counts them as full with the limit, the reason and the time,
// and the log warns once for the spell, not once per session.
func TestZygoteFullSaysSo(t *testing.T) {
	_, name := testRootfs(t)
	d := startDaemon(t, "--zygote-bare=true", "--config", writeConf(t, "[zygote]\nchildren = 1\n"))
	z := d.waitZygote(t, 0)
	if z.Rootfs != name || z.Children != 1 || z.Full != 0 || z.LastFallbackAt != nil {
		t.Fatalf("zygote %+v: want a bare one on %s with children 1 and no fallback yet", z, name)
	}
	ctx := context.Background()
	for i := range 3 {
		sess, err := d.client.CreateSession(ctx, &agentapi.SessionRequest{Rootfs: name})
		if err != nil {
			t.Fatal(err)
		}
		defer d.client.DeleteSession(ctx, sess.ID)
		if r := execOK(t, d, sess.ID, "print(6*7)"); r.Stdout != "42\n" {
			t.Fatalf("session %d: %q", i, r.Stdout)
		}
	}
	z = d.waitZygote(t, 0)
	if z.Live != 1 || z.Fallbacks != 2 || z.Full != 2 || !strings.Contains(z.LastFallback, "children alive") || z.LastFallbackAt == nil {
		t.Fatalf("zygote %+v: want 1 child, 2 fallbacks, both full, with the reason and time", z)
	}
	if n := strings.Count(d.log.String(), "zygote could not take a run"); n != 1 {
		t.Fatalf("%d warnings for two cold sessions, want 1:\n%s", n, d.log.String())
	}
}
