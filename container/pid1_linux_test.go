package container

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/internal/testenv"
)

// The command is not the sandbox's pid 1 (the init is, as docker --init's
// tini): it gets the default action of the signals it sends itself, its
// status comes back as it ended (128+N and the signal's name for a death
// by signal N), and the orphans of its children are reaped.
func TestCommandIsNotPID1(t *testing.T) {
	e := newTestEngine(t)
	rootfs := testenv.Rootfs(t)
	// The command never waits for the orphan, so only a reaping pid 1
	// makes it go: a zombie stays in /proc until the run's deadline.
	const orphan = `
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
	cases := []struct {
		name   string
		argv   []string
		code   int
		signal string
		stdout string
	}{
		{"bash kill -TERM $$", []string{"bash", "-c", "kill -TERM $$; echo survived"}, 143, "SIGTERM", ""},
		{"python3 os.kill SIGTERM", []string{"python3", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM); print('survived')"}, 143, "SIGTERM", ""},
		{"sh kill -9 $$", []string{"sh", "-c", "kill -9 $$; echo survived"}, 137, "SIGKILL", ""},
		{"exit code", []string{"sh", "-c", "exit 3"}, 3, "", ""},
		{"orphan reaped", []string{"python3", "-c", orphan}, 0, "", "reaped"},
		{"pid 1 is not the command", []string{"sh", "-c", "test $$ != 1 && kill -TERM 1; sleep 60"}, 143, "SIGTERM", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.Run(context.Background(), Spec{RootfsDir: rootfs, Argv: tc.argv, Limits: Limits{Timeout: 15 * time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tc.code || res.Signal != tc.signal || strings.TrimSpace(string(res.Stdout)) != tc.stdout {
				t.Errorf("exit %d signal %q status %s stdout %q stderr %q; want exit %d signal %q stdout %q",
					res.ExitCode, res.Signal, res.Status, res.Stdout, res.Stderr, tc.code, tc.signal, tc.stdout)
			}
			if tc.signal != "" && res.Status != StatusKilled {
				t.Errorf("status %s, want %s", res.Status, StatusKilled)
			}
		})
	}
}

// A SIGTERM the engine sends the sandbox reaches the command, which a
// pid 1 without a handler would ignore.
func TestHostSignalReachesCommand(t *testing.T) {
	e := newTestEngine(t)
	sb, err := e.Start(context.Background(), Spec{RootfsDir: testenv.Rootfs(t), Argv: []string{"sh", "-c", "echo up; exec sleep 60"}, Limits: Limits{Timeout: 15 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { out, _, _, _ := sb.Output(); return strings.Contains(string(out), "up") })
	if err := sb.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	res, err := sb.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusKilled || res.Signal != "SIGTERM" || res.ExitCode != 143 {
		t.Errorf("status %s exit %d signal %q, want killed by SIGTERM (143)", res.Status, res.ExitCode, res.Signal)
	}
}

// BenchmarkInitSpawn alternates python3 -c 'print(1)' cold on two engines
// whose inits differ: this build's, which stays pid 1 and forks the
// command, and NSBOX_BENCH_BASE_INIT, an nsbox-init that execs it (built
// at the commit before: git archive it and go build ./cmd/nsbox-init), so
// that machine drift hits both alike. It reports each one's median and
// p95 and the ratio of the medians.
func BenchmarkInitSpawn(b *testing.B) {
	base := os.Getenv("NSBOX_BENCH_BASE_INIT")
	if base == "" {
		b.Skip("NSBOX_BENCH_BASE_INIT names no nsbox-init to compare with")
	}
	self := filepath.Join(b.TempDir(), "nsbox-init")
	if out, err := exec.Command("go", "build", "-o", self, "github.com/nsbox/nsbox/cmd/nsbox-init").CombinedOutput(); err != nil {
		b.Fatalf("build nsbox-init: %v: %s", err, out)
	}
	root := testenv.Rootfs(b)
	engines := map[string]*Engine{}
	for name, bin := range map[string]string{"fork": self, "exec": base} {
		e, err := New(Config{RunDir: b.TempDir(), CgroupName: testenv.CgroupName(), InitBinary: bin})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { e.Close() })
		engines[name] = e
	}
	got := map[string]sample{}
	for b.Loop() {
		for _, name := range []string{"fork", "exec"} {
			t0 := time.Now()
			res, err := engines[name].Run(context.Background(), Spec{RootfsDir: root, Argv: []string{"python3", "-c", "print(1)"}})
			if err != nil || res.Status != StatusOK {
				b.Fatalf("%s: %v %+v", name, err, res)
			}
			got[name] = append(got[name], time.Since(t0))
		}
	}
	for _, n := range []string{"fork", "exec"} {
		b.ReportMetric(ms(got[n].pct(0.5)), n+"-p50-ms")
		b.ReportMetric(ms(got[n].pct(0.95)), n+"-p95-ms")
	}
	b.ReportMetric(float64(got["fork"].pct(0.5))/float64(got["exec"].pct(0.5)), "fork/exec")
	b.ReportMetric(0, "ns/op")
}
