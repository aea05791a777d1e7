package container

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/internal/leftovers"
	"github.com/nsbox/nsbox/container/internal/locks"
	"github.com/nsbox/nsbox/container/internal/testenv"
)

// A control socket reaches the command as fd 3 and nothing else does.
func TestControlSocket(t *testing.T) {
	e := newTestEngine(t)
	code := `
import os, socket
s = socket.socket(fileno=3)
fds = sorted(int(f) for f in os.listdir("/proc/self/fd"))
line = s.makefile().readline()
s.sendall(("echo:" + line.strip() + " fds:" + ",".join(map(str, fds)) + "\n").encode())
`
	sb, err := startSpec(t, context.Background(), e, Spec{RootfsDir: testenv.Rootfs(t), Argv: []string{"python3", "-c", code}, Control: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Control().Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	reply, err := bufio.NewReader(sb.Control()).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	// fds seen by listdir: 0,1,2, the socket (3) and listdir's own fd.
	if !strings.HasPrefix(reply, "echo:hello fds:0,1,2,3,4") || strings.Count(reply, ",") != 4 {
		t.Errorf("reply %q", reply)
	}
	res, err := sb.Wait()
	if err != nil || res.Status != StatusOK {
		t.Fatalf("wait: %v %+v", err, res)
	}
}

// The host side reads and writes the workspace of a live sandbox beneath
// its mount, and never through a symlink the sandbox planted.
func TestWorkspaceHostAccess(t *testing.T) {
	e := newTestEngine(t)
	code := `
import os, sys
os.symlink("/etc", "etc-link")
os.mkdir("d"); open("d/made.txt", "w").write("from sandbox")
print("ready", flush=True)
sys.stdin.readline()
print(open("uploaded.txt").read())
`
	stdinR, stdinW := ioPipe(t)
	sb, err := startSpec(t, context.Background(), e, Spec{RootfsDir: testenv.Rootfs(t), Argv: []string{"python3", "-c", code}, Stdin: stdinR})
	if err != nil {
		t.Fatal(err)
	}
	ws := sb.Workspace()
	// "ready" on stdout comes after the file is complete.
	waitFor(t, func() bool { out, _, _, _ := sb.Output(); return strings.Contains(string(out), "ready") })
	before, err := ws.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if b, err := ws.ReadFile("d/made.txt", 100); err != nil || string(b) != "from sandbox" {
		t.Errorf("read: %q %v", b, err)
	}
	if _, err := ws.ReadFile("etc-link/passwd", 1<<20); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("read through a planted symlink: err %v, want ErrInvalidPath", err)
	}
	if err := ws.WriteFile("etc-link/evil", []byte("x"), 0); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("write through a planted symlink: err %v, want ErrInvalidPath", err)
	}
	if _, err := ws.ReadFile("d/made.txt", 3); !errors.Is(err, ErrTooLarge) {
		t.Errorf("limit not enforced: %v", err)
	}
	if err := ws.WriteFile("uploaded.txt", []byte("from host"), 0); err != nil {
		t.Fatal(err)
	}
	changed, cut, err := ws.Changed(before, nil)
	if err != nil || cut || len(changed) != 1 || changed[0].Path != "uploaded.txt" {
		t.Errorf("changed = %+v, truncated %v, %v", changed, cut, err)
	}
	list, cut, err := ws.List("")
	if err != nil || cut {
		t.Fatal(err, cut)
	}
	var paths []string
	for _, e := range list {
		paths = append(paths, e.Path)
	}
	if got := strings.Join(paths, " "); got != "d d/made.txt etc-link uploaded.txt" {
		t.Errorf("list = %s", got)
	}
	stdinW.Write([]byte("go\n"))
	stdinW.Close()
	res, err := sb.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if out := mustOK(t, res); out != "ready\nfrom host" {
		t.Errorf("stdout %q", out)
	}
}

// Recover deletes liveness locks nobody holds once they are old, and
// never one that is held or new.
func TestRecoverRemovesStaleLocks(t *testing.T) {
	e := newTestEngine(t)
	old := time.Now().Add(-2 * leftovers.StaleAge)
	mk := func(id string, mtime time.Time) string {
		p := locks.LivePath(e.liveDir, id)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(p) })
		return p
	}
	stale := mk("test-stale-"+NewID(), old)
	fresh := mk("test-fresh-"+NewID(), time.Now())
	held := mk("test-held-"+NewID(), old)
	f, err := locks.File(held)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := e.Recover(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale lock %s kept", stale)
	}
	for _, p := range []string{fresh, held} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
}

// An engine that cannot be made leaves nothing behind: a bad init binary
// fails New after the cgroup parent was created, which must go again.
func TestNewFailureRemovesTheCgroupParent(t *testing.T) {
	testenv.RequireRoot(t)
	name := testenv.CgroupName()
	_, err := New(Config{RunDir: t.TempDir(), CgroupName: name, InitBinary: filepath.Join(t.TempDir(), "no-such-init")})
	if err == nil || !strings.Contains(err.Error(), "sandbox init binary") {
		t.Fatalf("New with a missing init binary: err = %v", err)
	}
	assertNoCgroupParent(t, name)
}
