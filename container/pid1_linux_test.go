package container

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/internal/testenv"
)

// orphanPy forks a child that forks a grandchild and exits; the command
// never waits for the orphan, so only a reaping pid 1 makes it go: a
// zombie stays in /proc until the run's deadline.
const orphanPy = `
import os, time
r, w = os.pipe()
child = os.fork()
if child == 0:
    grandchild = os.fork()
    if grandchild == 0:
        os.close(r); os.close(w); os._exit(0)
    os.write(w, b'%d' % grandchild); os._exit(0)
os.close(w)
grandchild = int(os.read(r, 32))
os.waitpid(child, 0)
while os.path.exists('/proc/%d' % grandchild):
    time.sleep(0.01)
print('reaped')
`

// With Spec.Init the command is not the sandbox's pid 1 (a reaper is, as
// docker --init's tini): the signals it sends itself end it, its status
// comes back as a shell's (128+N for a death by signal N), a signal to
// pid 1 reaches it, and the orphans of its children are reaped. Without
// Init the command is pid 1 and the kernel drops the signals it has no
// handler for: the documented default (README, "PID 1").
func TestInitCommandIsNotPID1(t *testing.T) {
	e := newTestEngine(t)
	rootfs := testenv.Rootfs(t)
	cases := []struct {
		name   string
		init   bool
		argv   []string
		code   int
		stdout string
	}{
		{"bash kill -TERM $$", true, []string{"bash", "-c", "kill -TERM $$; echo survived"}, 143, ""},
		{"python3 os.kill SIGTERM", true, []string{"python3", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM); print('survived')"}, 143, ""},
		{"sh kill -9 $$", true, []string{"sh", "-c", "kill -9 $$; echo survived"}, 137, ""},
		{"exit code", true, []string{"sh", "-c", "exit 3"}, 3, ""},
		{"orphan reaped", true, []string{"python3", "-c", orphanPy}, 0, "reaped"},
		{"pid 1 forwards", true, []string{"sh", "-c", "test $$ != 1 && kill -TERM 1; sleep 60"}, 143, ""},
		{"pid 1's name", true, []string{"cat", "/proc/1/comm"}, 0, "nsbox-reaper"},
		{"pid 1 holds no fd of the command's", true, []string{"sh", "-c", "ls /proc/1/fd | wc -l"}, 0, "0"},
		{"env and pid", true, []string{"sh", "-c", "test $$ != 1 && echo $HOME"}, 0, "/workspace"},
		{"pid 1 ignores kill -TERM $$", false, []string{"bash", "-c", "kill -TERM $$; echo survived"}, 0, "survived"},
		{"pid 1 ignores os.kill SIGTERM", false, []string{"python3", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM); print('survived')"}, 0, "survived"},
		{"pid 1 ignores kill -9 $$", false, []string{"sh", "-c", "kill -9 $$; echo survived"}, 0, "survived"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.Run(context.Background(), Spec{RootfsDir: rootfs, Argv: tc.argv, Init: tc.init, Limits: Limits{Timeout: 30 * time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tc.code || res.Status == StatusTimeout || strings.TrimSpace(string(res.Stdout)) != tc.stdout {
				t.Errorf("exit %d signal %q status %s stdout %q stderr %q; want exit %d stdout %q",
					res.ExitCode, res.Signal, res.Status, res.Stdout, res.Stderr, tc.code, tc.stdout)
			}
		})
	}
}

// A command the reaper cannot exec is the run's error, as without it.
func TestInitExecFailure(t *testing.T) {
	e := newTestEngine(t)
	_, err := e.Run(context.Background(), Spec{RootfsDir: testenv.Rootfs(t), Argv: []string{"/etc/hostname"}, Init: true})
	if !errors.Is(err, ErrBadCommand) || !strings.Contains(err.Error(), "/etc/hostname") {
		t.Fatalf("err %v, want ErrBadCommand naming /etc/hostname", err)
	}
}

// The reaper runs from a sealed copy (CVE-2019-5736): the command, which
// runs as the same user as its pid 1, cannot open pid 1's binary for
// writing, nor write to it through a file it could open.
func TestInitRunsFromASealedCopyOfNsbox(t *testing.T) {
	e := newTestEngine(t)
	code := `
import os
for flags in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC):
    try:
        os.close(os.open("/proc/1/exe", flags)); print("OPENED", flags)
    except OSError as e:
        print("denied", e.errno)
print("pid1", os.readlink("/proc/1/exe"))
`
	res, err := e.Run(context.Background(), Spec{RootfsDir: testenv.Rootfs(t), Argv: []string{"python3", "-c", code}, Init: true})
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Stdout)
	if res.Status != StatusOK || strings.Contains(out, "OPENED") || strings.Count(out, "denied") != 3 {
		t.Fatalf("status %s stdout %q stderr %q; want three denied opens", res.Status, out, res.Stderr)
	}
	if !strings.Contains(out, "memfd:") {
		t.Errorf("pid 1 does not run from a memfd: %q", out)
	}
}

// BenchmarkColdPrintInit alternates python3 -c 'print(1)' cold without
// and with Spec.Init on one engine (and bwrap, the baseline), so that
// machine drift hits all alike, and reports each one's p25, p50 and p75
// and the ratios of the medians. NSBOX_BENCH_INIT names the sandbox init
// to use (a build of cmd/nsbox-init, as installed); the reaper is this
// binary, so build it static to measure what nsbox's own would cost:
//
//	CGO_ENABLED=0 go build -o /tmp/nsbox-init ./cmd/nsbox-init
//	go test -c -o /tmp/container.test -ldflags '-linkmode external -extldflags "-static"' ./container/
//	cd container && NSBOX_BENCH_INIT=/tmp/nsbox-init /tmp/container.test \
//		-test.run '^$' -test.bench ColdPrintInit -test.benchtime 200x -test.count 2
func BenchmarkColdPrintInit(b *testing.B) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		b.Skip("bwrap not installed (apt-get install bubblewrap): no baseline")
	}
	testInitBinary = os.Getenv("NSBOX_BENCH_INIT")
	defer func() { testInitBinary = "" }()
	e := newTestEngine(b)
	root := testenv.Rootfs(b)
	argv := []string{"python3", "-c", "print(1)"}
	run := func(init bool) time.Duration {
		t0 := time.Now()
		res, err := e.Run(context.Background(), Spec{RootfsDir: root, Argv: argv, Init: init})
		if err != nil || res.Status != StatusOK {
			b.Fatalf("nsbox (init %v): %v %+v", init, err, res)
		}
		return time.Since(t0)
	}
	run(true) // the reaper's copy is sealed at the first run that asks
	var off, on, bw sample
	for b.Loop() {
		off = append(off, run(false))
		on = append(on, run(true))
		t0 := time.Now()
		if out, err := bwrapCmd(root, argv...).CombinedOutput(); err != nil {
			b.Fatalf("bwrap: %v: %s", err, out)
		}
		bw = append(bw, time.Since(t0))
	}
	for _, s := range []struct {
		name string
		d    sample
	}{{"off", off}, {"init", on}, {"bwrap", bw}} {
		b.ReportMetric(ms(s.d.pct(0.25)), s.name+"-p25-ms")
		b.ReportMetric(ms(s.d.pct(0.5)), s.name+"-p50-ms")
		b.ReportMetric(ms(s.d.pct(0.75)), s.name+"-p75-ms")
	}
	b.ReportMetric(float64(on.pct(0.5))/float64(off.pct(0.5)), "init/off")
	b.ReportMetric(float64(off.pct(0.5))/float64(bw.pct(0.5)), "off/bwrap")
	b.ReportMetric(float64(on.pct(0.5))/float64(bw.pct(0.5)), "init/bwrap")
	b.ReportMetric(0, "ns/op")
}
