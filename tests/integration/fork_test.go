package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/tests/internal/testdaemon"
)

// parentSetup makes a session's state as the fork and park tests need it:
// data that carries, names that cannot (an open file, a generator, a
// thread), workspace files with a mode, and a symlink pointing outside.
const parentSetup = `
import os, random, fractions, threading
d = {'k': [1, 2], 's': 'x'}
q = fractions.Fraction(1, 3)
os.makedirs('/workspace/data/sub', exist_ok=True)
with open('/workspace/data/sub/a.txt', 'w') as w:
    w.write('hello')
os.chmod('/workspace/data/sub/a.txt', 0o600)
os.symlink('/etc/passwd', '/workspace/out')
f = open('/workspace/open.txt', 'w')
g = (i for i in range(3))
th = threading.Thread(target=print)
`

// checkCarried fails unless session id has the parent's data, files and
// symlink, and lists the names that cannot be carried.
func checkCarried(t *testing.T, d *daemon, id string, nc []agentapi.NotCarried) {
	t.Helper()
	listed := map[string]string{}
	for _, n := range nc {
		listed[n.Name] = n.Reason
	}
	for _, name := range []string{"f", "g", "th"} {
		if listed[name] == "" {
			t.Errorf("%s: %s is not in not_carried %+v", id, name, nc)
		}
	}
	for _, name := range []string{"d", "q", "os", "random"} {
		if r, ok := listed[name]; ok {
			t.Errorf("%s: %s was not carried: %s", id, name, r)
		}
	}
	res := execOK(t, d, id, "(d, q * 3, open('/workspace/data/sub/a.txt').read(), oct(os.stat('/workspace/data/sub/a.txt').st_mode & 0o777), os.path.islink('/workspace/out'), os.readlink('/workspace/out'))")
	if want := "({'k': [1, 2], 's': 'x'}, Fraction(1, 1), 'hello', '0o600', True, '/etc/passwd')"; res.Value != want {
		t.Fatalf("%s: %s, want %s", id, res.Value, want)
	}
}

func wantStatus(t *testing.T, err error, status int, text string) {
	t.Helper()
	var ae *agentapi.Error
	if !errors.As(err, &ae) || ae.Status != status || !strings.Contains(ae.Message, text) {
		t.Fatalf("got %v, want %d with %q", err, status, text)
	}
}

// sandboxUIDs maps the daemon's sandbox cgroups (by name, one hierarchy)
// to the host uid of a process in each.
func sandboxUIDs(t *testing.T, d *daemon) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, dir := range d.leftoverCgroups(t) {
		name := filepath.Base(dir)
		if _, ok := out[name]; ok {
			continue
		}
		procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		pid, _, _ := strings.Cut(string(procs), "\n")
		if err != nil || pid == "" {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, "Uid:"); ok {
				out[name] = strings.Fields(v)[1]
			}
		}
	}
	return out
}

// TestSessionFork forks a session through the daemon: each branch has the
// parent's data and workspace (a symlink stays a symlink), lists what it
// could not carry, draws its own random numbers, and lives apart (its own
// sandbox, cgroup and host uid; a change in one is not seen elsewhere).
// Bad counts, a busy and a dead parent are refused; nothing is left.
func TestSessionFork(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	parent := newSession(t, d, &agentapi.SessionRequest{})
	execOK(t, d, parent, parentSetup)

	out, err := d.client.ForkSession(ctx, parent, 3)
	if err != nil {
		t.Fatalf("ForkSession: %v", err)
	}
	if len(out.Sessions) != 3 {
		t.Fatalf("%d branches, want 3", len(out.Sessions))
	}
	ids := map[string]bool{parent: true}
	var branches []string
	for _, b := range out.Sessions {
		if ids[b.ID] || b.State != agentapi.SessionIdle {
			t.Fatalf("branch %+v: a repeated id or not idle", b.Session)
		}
		ids[b.ID] = true
		branches = append(branches, b.ID)
		checkCarried(t, d, b.ID, b.NotCarried)
	}

	uids := sandboxUIDs(t, d)
	seen := map[string]bool{}
	for _, u := range uids {
		seen[u] = true
	}
	if len(uids) != 4 || len(seen) != 4 {
		t.Errorf("want 4 sandbox cgroups with 4 host uids, got %v", uids)
	}

	draws := map[string]bool{}
	for _, id := range append([]string{parent}, branches...) {
		draws[execOK(t, d, id, "random.random()").Value] = true
	}
	if len(draws) != 4 {
		t.Errorf("the parent and 3 branches drew %d distinct numbers, want 4", len(draws))
	}
	execOK(t, d, branches[0], "d['k'].append(3); open('/workspace/data/sub/a.txt', 'w').write('changed')")
	for _, id := range []string{parent, branches[1]} {
		if res := execOK(t, d, id, "(d['k'], open('/workspace/data/sub/a.txt').read())"); res.Value != "([1, 2], 'hello')" {
			t.Errorf("%s sees a branch's change: %s", id, res.Value)
		}
	}

	for _, n := range []int{0, 17, -1} {
		b := fmt.Sprintf(`{"count": %d}`, n)
		resp, err := d.http.Post("http://nsbox/v1/sessions/"+parent+"/fork", "application/json", strings.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("fork with count %d: %d, want 400", n, resp.StatusCode)
		}
	}
	_, err = d.client.ForkSession(ctx, parent, 17)
	wantStatus(t, err, http.StatusBadRequest, "outside 1 to 16")

	done := make(chan error, 1)
	go func() {
		// Busy until the test has tried the fork: it opens the gate after.
		_, err := d.client.Exec(ctx, parent, &agentapi.ExecRequest{Code: "import os, time\nwhile not os.path.exists('/workspace/gate'): time.sleep(0.01)"})
		done <- err
	}()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if s, err := d.client.Session(ctx, parent); err == nil && s.State == agentapi.SessionBusy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the exec never showed as busy")
		}
	}
	_, err = d.client.ForkSession(ctx, parent, 1)
	wantStatus(t, err, http.StatusConflict, "running an exec")
	if err := d.client.PutFile(ctx, parent, "gate", strings.NewReader("")); err != nil {
		t.Fatalf("open the gate: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if res := execOK(t, d, parent, "d['k']"); res.Value != "[1, 2]" {
		t.Fatalf("the parent after a refused fork: %s", res.Value)
	}

	// A paused parent forks and stays paused.
	if _, err := d.client.PauseSession(ctx, parent); err != nil {
		t.Fatal(err)
	}
	out, err = d.client.ForkSession(ctx, parent, 1)
	if err != nil {
		t.Fatalf("fork of a paused session: %v", err)
	}
	if s, _ := d.client.Session(ctx, parent); s.State != agentapi.SessionPaused {
		t.Errorf("the parent after the fork: %s, want paused", s.State)
	}
	branches = append(branches, out.Sessions[0].ID)

	dead := newSession(t, d, &agentapi.SessionRequest{})
	if res, err := d.client.Exec(ctx, dead, &agentapi.ExecRequest{Code: "import os; os._exit(3)"}); err != nil || !res.SessionDead {
		t.Fatalf("killing the session: %+v %v", res, err)
	}
	_, err = d.client.ForkSession(ctx, dead, 1)
	wantStatus(t, err, http.StatusConflict, "dead")

	for _, id := range append(branches, parent, dead) {
		if err := d.client.DeleteSession(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	d.assertClean(t, append(branches, parent, dead)...)
}

// TestSessionForkMax: a fork past [sessions] max is refused (429) and
// leaves no branch behind.
func TestSessionForkMax(t *testing.T) {
	d := startDaemon(t, "--max-sessions", "3")
	ctx := context.Background()
	parent := newSession(t, d, &agentapi.SessionRequest{})
	execOK(t, d, parent, "x = 1")
	_, err := d.client.ForkSession(ctx, parent, 3)
	wantStatus(t, err, http.StatusTooManyRequests, "session slots")
	if l, _ := d.client.Sessions(ctx); len(l) != 1 {
		t.Fatalf("sessions after a refused fork: %+v", l)
	}
	if _, err := d.client.ForkSession(ctx, parent, 2); err != nil {
		t.Fatalf("a fork that fits: %v", err)
	}
}

// TestSessionForkDataFrame forks a session holding a DataFrame and a
// cell-defined function and lambda (cloudpickle, on the data-science
// rootfs); a Node session is refused.
func TestSessionForkDataFrame(t *testing.T) {
	store, _ := testdaemon.Rootfs(t)
	name := testdaemon.DataSciRootfs(t)
	if _, err := os.Stat(filepath.Join(store, name, "rootfs/usr/lib/python3/dist-packages/cloudpickle")); err != nil {
		t.Skipf("the data-science rootfs %q has no cloudpickle (rebuild it: the datasci profile has python3-cloudpickle): %v", name, err)
	}
	d := startDaemon(t, "--default-rootfs", name)
	ctx := context.Background()
	parent := newSession(t, d, &agentapi.SessionRequest{})
	execOK(t, d, parent, "import pandas as pd, numpy as np\ndf = pd.DataFrame({'a': range(1000), 'b': np.arange(1000) * 2.0})\nk = 3\ndef scale(x): return x * k\nsq = lambda v: v * v")
	out, err := d.client.ForkSession(ctx, parent, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range out.Sessions {
		if len(b.NotCarried) != 0 {
			t.Errorf("%s: not carried %+v", b.ID, b.NotCarried)
		}
		if res := execOK(t, d, b.ID, "(int(df.b.sum()), scale(2), sq(4))"); res.Value != "(999000, 6, 16)" {
			t.Errorf("%s: %s", b.ID, res.Value)
		}
	}
	a, b := out.Sessions[0].ID, out.Sessions[1].ID
	if x, y := execOK(t, d, a, "float(np.random.rand())").Value, execOK(t, d, b, "float(np.random.rand())").Value; x == y {
		t.Errorf("two branches drew the same numpy number %s", x)
	}

	js := newSession(t, d, &agentapi.SessionRequest{Language: agentapi.LanguageJavaScript})
	_, err = d.client.ForkSession(ctx, js, 1)
	wantStatus(t, err, http.StatusBadRequest, "fork and park are for Python sessions")
	_, err = d.client.ParkSession(ctx, js)
	wantStatus(t, err, http.StatusBadRequest, "fork and park are for Python sessions")
}

// TestSessionForkNearMemoryLimit: a state that would not fit in what the
// session's memory limit leaves free is refused (413) before it is
// written, and the parent lives on.
func TestSessionForkNearMemoryLimit(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	id := newSession(t, d, &agentapi.SessionRequest{Limits: &agentapi.Limits{MemoryBytes: 160 << 20}})
	execOK(t, d, id, "big = bytearray(100 << 20)")
	_, err := d.client.ForkSession(ctx, id, 1)
	wantStatus(t, err, http.StatusRequestEntityTooLarge, "memory limit leaves free")
	_, err = d.client.ParkSession(ctx, id)
	wantStatus(t, err, http.StatusRequestEntityTooLarge, "memory limit leaves free")
	if res := execOK(t, d, id, "len(big)"); res.Value != "104857600" {
		t.Fatalf("the parent after a refused fork: %s", res.Value)
	}
}
