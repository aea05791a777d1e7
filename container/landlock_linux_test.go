package container

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container/internal/testenv"
	"github.com/nsbox/nsbox/container/sandboxinit"
)

// landlockEngine is an engine with [security] landlock = mode.
func landlockEngine(t testing.TB, mode string) *Engine {
	t.Helper()
	testenv.RequireRoot(t)
	e, err := New(Config{RunDir: t.TempDir(), CgroupName: testenv.CgroupName(), InitBinary: testInitBinary, Landlock: mode})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func requireLandlock(t *testing.T) {
	t.Helper()
	if sandboxinit.LandlockABI() == 0 {
		t.Skip("this kernel has no Landlock")
	}
}

// TestLandlockRefusesEscapedMount simulates a mount namespace escape: once
// the sandbox runs, host directories (world-readable and writable, so its
// uid could use them) are attached into its mount tree, read-write. At
// /srv, outside Landlock's rules, the sandbox is refused reading (listing
// names stays possible everywhere); at /usr/src, under /usr, which
// Landlock allows read-only, it reads but is refused writing; over /opt,
// which has a rule of its own, the rule does not carry to what covers it:
// reading is refused. With landlock = "off" the same attacks succeed,
// which shows the mounts really are there.
func TestLandlockRefusesEscapedMount(t *testing.T) {
	requireLandlock(t)
	code := `
import errno, os, sys
sys.stdin.readline()
def do(what, f):
    try:
        print(what, f())
    except OSError as e:
        print(what, errno.errorcode[e.errno])
do("read", lambda: open("/srv/secret").read())
do("list", lambda: os.listdir("/srv"))
do("read-usr", lambda: open("/usr/src/secret").read())
do("write-usr", lambda: open("/usr/src/new", "w").write("x"))
do("read-opt", lambda: open("/opt/secret").read())
`
	for _, tc := range []struct {
		mode string
		want string
	}{
		{sandboxinit.LandlockAuto, "read EACCES\nlist ['secret']\nread-usr host-secret\nwrite-usr EACCES\nread-opt EACCES"},
		{sandboxinit.LandlockOff, "read host-secret\nlist ['secret']\nread-usr host-secret\nwrite-usr 1\nread-opt host-secret"},
	} {
		e := landlockEngine(t, tc.mode)
		for _, k := range sandboxKinds(t, e) {
			t.Run(tc.mode+"/"+k.name, func(t *testing.T) {
				inR, inW := ioPipe(t)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				sb, err := k.start(ctx, Spec{RootfsDir: testenv.Rootfs(t), Argv: []string{"python3", "-c", code}, Stdin: inR})
				if err != nil {
					t.Fatal(err)
				}
				for _, at := range []string{"/srv", "/usr/src", "/opt"} {
					if err := attachInto(sb.Pid(), hostDir(t), at); err != nil {
						sb.Kill(StatusKilled)
						sb.Wait()
						t.Fatalf("attach a host directory at %s: %v", at, err)
					}
				}
				inW.Write([]byte("go\n"))
				inW.Close()
				res, err := sb.Wait()
				if err != nil {
					t.Fatal(err)
				}
				if got := mustOK(t, res); got != tc.want {
					t.Fatalf("got %q, want %q", got, tc.want)
				}
			})
		}
	}
}

// hostDir is a host directory anyone may read and write, with a file
// "secret" anyone may read.
func hostDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("host-secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// attachEnv names the request of a test binary re-executed by attachInto:
// "PID SRC DST".
const attachEnv = "NSBOX_TEST_ATTACH"

// attachInto attaches a clone of the host directory src at dst in the
// mount namespace of pid. A child process (this test binary again, see
// maybeAttach) does it: entering a mount namespace needs a thread with its
// own fs state, which must end after, and a thread of this process that
// ends takes with it every sandbox it happened to clone (their parent-death
// signal follows the cloning thread, not the process).
func attachInto(pid int, src, dst string) error {
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %s %s", attachEnv, pid, src, dst))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// maybeAttach does attachInto's work when this process is its child, and
// exits.
func maybeAttach() {
	req, ok := os.LookupEnv(attachEnv)
	if !ok {
		return
	}
	var pid int
	var src, dst string
	if _, err := fmt.Sscan(req, &pid, &src, &dst); err != nil {
		fmt.Fprintf(os.Stderr, "%s=%q: %v\n", attachEnv, req, err)
		os.Exit(2)
	}
	runtime.LockOSThread() // never unlocked: the process exits from here
	err := func() error {
		tree, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return err
		}
		ns, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			return err
		}
		if err := unix.Setns(ns, unix.CLONE_NEWNS); err != nil {
			return err
		}
		return unix.MoveMount(tree, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// BenchmarkLandlockSpawn alternates python3 -c 'print(1)' on two engines
// that differ only in [security] landlock (auto, off), cold (the init
// applies the rules) and forked by a zygote (the child does), so that
// machine drift hits both alike. It reports each one's median and p95 and
// the ratio of the medians; the cost is the rules' set-up and Landlock's
// checks on every path the interpreter opens.
func BenchmarkLandlockSpawn(b *testing.B) {
	root := testenv.Rootfs(b)
	on, off := landlockEngine(b, sandboxinit.LandlockAuto), landlockEngine(b, sandboxinit.LandlockOff)
	if sandboxinit.LandlockABI() == 0 {
		b.Skip("this kernel has no Landlock")
	}
	type way struct {
		name  string
		start func(context.Context, Spec) (*Result, error)
		argv  []string
	}
	ways := func(e *Engine) []way {
		return []way{
			{"cold", e.Run, []string{"python3", "-c", "print(1)"}},
			{"zygote", zygoteFor(b, e, root).Run, []string{"python3", "-I", "-c", "print(1)"}},
		}
	}
	onWays, offWays := ways(on), ways(off)
	got := map[string]sample{}
	for round := 0; b.Loop(); round++ {
		for i := range onWays {
			pair := []struct {
				key string
				way way
			}{{"on", onWays[i]}, {"off", offWays[i]}}
			// Which goes first swaps every round: the first of a pair
			// follows the other way's run (a cold run's teardown is
			// still going on) and is a few percent slower for it.
			if round%2 == 1 {
				pair[0], pair[1] = pair[1], pair[0]
			}
			for _, w := range pair {
				t0 := time.Now()
				res, err := w.way.start(context.Background(), Spec{RootfsDir: root, Argv: w.way.argv})
				if err != nil || res.Status != StatusOK {
					b.Fatalf("%s %s: %v %+v", w.way.name, w.key, err, res)
				}
				k := w.way.name + "-" + w.key
				got[k] = append(got[k], time.Since(t0))
			}
		}
	}
	for _, n := range []string{"cold", "zygote"} {
		on, off := got[n+"-on"], got[n+"-off"]
		b.ReportMetric(ms(on.pct(0.5)), n+"-landlock-p50-ms")
		b.ReportMetric(ms(off.pct(0.5)), n+"-off-p50-ms")
		b.ReportMetric(ms(on.pct(0.95)), n+"-landlock-p95-ms")
		b.ReportMetric(ms(off.pct(0.95)), n+"-off-p95-ms")
		b.ReportMetric(float64(on.pct(0.5))/float64(off.pct(0.5)), n+"-on/off")
	}
	b.ReportMetric(0, "ns/op")
}
