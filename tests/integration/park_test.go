package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
)

// parkDir is where the test daemon keeps parked sessions.
func (d *daemon) parkDir() string {
	for i, a := range d.args {
		if a == "--state-dir" && i+1 < len(d.args) {
			return filepath.Join(d.args[i+1], "sessions")
		}
	}
	return ""
}

// checkParkFiles fails unless id's park directory is root's, 0700, with
// files 0600.
func checkParkFiles(t *testing.T, d *daemon, id string) {
	t.Helper()
	dir := filepath.Join(d.parkDir(), id)
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatalf("park directory: %v", err)
	}
	if st.Mode().Perm() != 0o700 || st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("%s: mode %v uid %d, want 0700 root", dir, st.Mode().Perm(), st.Sys().(*syscall.Stat_t).Uid)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 3 {
		t.Errorf("%s holds %d files, want 3", dir, len(ents))
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
			t.Errorf("%s: %v %v, want 0600 root", e.Name(), fi.Mode(), err)
		}
	}
}

func park(t *testing.T, d *daemon, id string) {
	t.Helper()
	s, err := d.client.ParkSession(context.Background(), id)
	if err != nil {
		t.Fatalf("ParkSession: %v", err)
	}
	if s.State != agentapi.SessionParked || s.ParkedAt == nil {
		t.Fatalf("after park: %+v", s)
	}
	checkParkFiles(t, d, id)
	if g, err := d.client.Session(context.Background(), id); err != nil || g.State != agentapi.SessionParked {
		t.Fatalf("GET a parked session: %+v %v", g, err)
	}
}

// TestSessionParkRevive parks a session and revives it: by an exec, by
// POST .../revive, after a daemon SIGTERM + restart and after a SIGKILL +
// restart; each time with its state and workspace, and saying what was
// not carried. A parked session has no sandbox; deleting it removes its
// files; a busy one is not parked.
func TestSessionParkRevive(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	id := newSession(t, d, &agentapi.SessionRequest{})
	execOK(t, d, id, parentSetup+"\nn = 0")

	park(t, d, id)
	if c := d.leftoverCgroups(t); len(c) > 0 {
		t.Errorf("a parked session keeps a sandbox: %q", c)
	}
	if l, _ := d.client.Sessions(ctx); len(l) != 1 || l[0].State != agentapi.SessionParked {
		t.Errorf("list with a parked session: %+v", l)
	}
	_, err := d.client.PauseSession(ctx, id)
	wantStatus(t, err, http.StatusConflict, "parked")
	res := execOK(t, d, id, "n += 1; n")
	if !res.Revived || res.Value != "1" {
		t.Fatalf("exec on a parked session: revived %v value %q", res.Revived, res.Value)
	}
	checkCarried(t, d, id, res.NotCarried)
	if _, err := os.Stat(filepath.Join(d.parkDir(), id)); !os.IsNotExist(err) {
		t.Errorf("the park files outlive the revive: %v", err)
	}

	for i, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		// What was not carried is gone: make it again, to be listed again.
		execOK(t, d, id, "f = open('/workspace/open.txt', 'w'); g = (i for i in range(3)); th = threading.Thread(target=print)")
		park(t, d, id)
		_ = d.signal(t, sig)
		d.start(t)
		if g, err := d.client.Session(ctx, id); err != nil || g.State != agentapi.SessionParked {
			t.Fatalf("after %v and a restart: %+v %v", sig, g, err)
		}
		r, err := d.client.ReviveSession(ctx, id)
		if err != nil {
			t.Fatalf("revive after %v: %v", sig, err)
		}
		if r.ID != id || r.State != agentapi.SessionIdle {
			t.Fatalf("revived: %+v", r.Session)
		}
		checkCarried(t, d, id, r.NotCarried)
		if res := execOK(t, d, id, "n += 1; n"); res.Value != strconv.Itoa(i+2) {
			t.Fatalf("after %v: n = %s", sig, res.Value)
		}
	}

	// A parked session deleted leaves nothing.
	park(t, d, id)
	if err := d.client.DeleteSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.parkDir(), id)); !os.IsNotExist(err) {
		t.Errorf("a deleted parked session's files: %v", err)
	}
	_, err = d.client.Session(ctx, id)
	wantStatus(t, err, http.StatusNotFound, "no such session")
	if err := d.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
	d.assertClean(t, id)
}

// TestSessionParkFull: a park past [sessions] park_max_bytes is refused
// (507) and the session lives on, unharmed; a busy or dead session is not
// parked (409).
func TestSessionParkFull(t *testing.T) {
	d := startDaemon(t, "--config", writeConf(t, "[sessions]\npark_max_bytes = 100000\n"))
	ctx := context.Background()
	id := newSession(t, d, &agentapi.SessionRequest{})
	execOK(t, d, id, "big = b'x' * 1000000")
	_, err := d.client.ParkSession(ctx, id)
	wantStatus(t, err, http.StatusInsufficientStorage, "park_max_bytes")
	if res := execOK(t, d, id, "len(big)"); res.Value != "1000000" {
		t.Fatalf("the session after a refused park: %s", res.Value)
	}
	if ents, _ := os.ReadDir(d.parkDir()); len(ents) != 0 {
		t.Errorf("a refused park left files: %v", ents)
	}
	done := make(chan error, 1)
	go func() {
		// Busy until the test has tried the park: it opens the gate after.
		_, err := d.client.Exec(ctx, id, &agentapi.ExecRequest{Code: "import os, time\nwhile not os.path.exists('/workspace/gate'): time.sleep(0.01)"})
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if s, err := d.client.Session(ctx, id); err == nil && s.State == agentapi.SessionBusy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the exec never showed as busy")
		}
	}
	_, err = d.client.ParkSession(ctx, id)
	wantStatus(t, err, http.StatusConflict, "running an exec")
	if err := d.client.PutFile(ctx, id, "gate", strings.NewReader("")); err != nil {
		t.Fatalf("open the gate: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if res, err := d.client.Exec(ctx, id, &agentapi.ExecRequest{Code: "import os; os._exit(3)"}); err != nil || !res.SessionDead {
		t.Fatalf("killing the session: %+v %v", res, err)
	}
	_, err = d.client.ParkSession(ctx, id)
	wantStatus(t, err, http.StatusConflict, "dead")
}

// TestParkRetention: a session's lifetime does not run while it is parked
// (a session parked past its lifetime revives, with what was left of it),
// and a parked session is kept [sessions] park_retention: then it is gone,
// its files removed without anyone asking, even across a restart.
func TestParkRetention(t *testing.T) {
	// The session has its lifetime for an exec and a park (a slow machine
	// takes seconds); the revive comes once the lifetime has passed, with
	// the retention's 10 s more to spare.
	const life, retention = 5 * time.Second, 15 * time.Second
	d := startDaemon(t, "--config", writeConf(t, fmt.Sprintf("[sessions]\npark_retention = \"%s\"\n", retention)))
	ctx := context.Background()
	id := newSession(t, d, &agentapi.SessionRequest{LifetimeMs: life.Milliseconds()})
	created := time.Now() // after the session's creation: its lifetime ends before created+life
	execOK(t, d, id, "x = 41")
	before := time.Now()
	park(t, d, id)
	if s, err := d.client.Session(ctx, id); err != nil || s.ExpiresAt.Before(before.Add(retention-time.Second)) || s.ExpiresAt.After(time.Now().Add(retention)) {
		t.Errorf("a parked session's expires_at %v (%v), want its park plus the %s retention", s.ExpiresAt, err, retention)
	}
	time.Sleep(time.Until(created.Add(life))) // past the session's own lifetime
	r, err := d.client.ReviveSession(ctx, id)
	if err != nil {
		t.Fatalf("revive a session parked past its lifetime: %v", err)
	}
	if left := time.Until(r.ExpiresAt); left <= 0 || left > life {
		t.Errorf("revived with %v of its lifetime left, want what it had at the park (under %s)", left, life)
	}
	if res := execOK(t, d, id, "x + 1"); res.Value != "42" {
		t.Fatalf("after the revive: %q", res.Value)
	}

	// Parked past the retention: removed by the daemon, on its own.
	second := newSession(t, d, &agentapi.SessionRequest{})
	park(t, d, second)
	third := newSession(t, d, &agentapi.SessionRequest{})
	park(t, d, third)
	if err := d.signal(t, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d.start(t) // the record's expiry is kept across a restart
	for deadline := time.Now().Add(retention + time.Minute); ; time.Sleep(100 * time.Millisecond) {
		ents, _ := os.ReadDir(d.parkDir())
		if len(ents) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("parked sessions still on disk a minute after the %s retention: %v", retention, ents)
		}
	}
	for _, id := range []string{second, third} {
		_, err := d.client.ReviveSession(ctx, id)
		wantStatus(t, err, http.StatusNotFound, "")
		if _, err := d.client.Session(ctx, id); err == nil {
			t.Errorf("session %s still listed after its retention", id)
		}
	}
}

// TestSessionLifetimePark: with lifetime_action "park" the end of the
// lifetime parks the session instead of ending it, after the exec running
// then has finished; its revive gets its whole lifetime again. Bad values
// and Node sessions are refused.
func TestSessionLifetimePark(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	// The lifetime leaves a slow machine seconds for the first exec and
	// the start of the second, which sleeps past the lifetime's end
	// whenever it started.
	const life = 5 * time.Second
	id := newSession(t, d, &agentapi.SessionRequest{LifetimeMs: life.Milliseconds(), LifetimeAction: "park"})
	execOK(t, d, id, "x = 5")
	// Running across the end of the lifetime: the park waits for it.
	if res := execOK(t, d, id, fmt.Sprintf("import time; time.sleep(%d); x += 1; x", int(life.Seconds())+1)); res.Value != "6" {
		t.Fatalf("the exec across the lifetime's end: %q", res.Value)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		s, err := d.client.Session(ctx, id)
		if err != nil {
			t.Fatalf("the session is gone at the end of its lifetime: %v", err)
		}
		if s.State == agentapi.SessionParked {
			break
		}
		if s.State == agentapi.SessionDead || time.Now().After(deadline) {
			t.Fatalf("at the end of its lifetime: %+v, want parked", s)
		}
	}
	before := time.Now()
	r, err := d.client.ReviveSession(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// Its whole lifetime from the revive, whenever the answer arrives.
	if r.ExpiresAt.Before(before.Add(life)) || r.ExpiresAt.After(time.Now().Add(life)) {
		t.Errorf("revived to expire at %v, %v after the revive was asked for; want its %s again", r.ExpiresAt, r.ExpiresAt.Sub(before), life)
	}
	if r.LifetimeAction != "park" {
		t.Errorf("revived with lifetime_action %q, want park", r.LifetimeAction)
	}
	if res := execOK(t, d, id, "x"); res.Value != "6" {
		t.Fatalf("after the revive: %q", res.Value)
	}
	for _, bad := range []struct {
		req  agentapi.SessionRequest
		says string
	}{
		{agentapi.SessionRequest{LifetimeAction: "sleep"}, "lifetime_action"},
		{agentapi.SessionRequest{LifetimeAction: "park", Language: "javascript"}, "Python sessions"},
	} {
		_, err := d.client.CreateSession(ctx, &bad.req)
		wantStatus(t, err, http.StatusBadRequest, bad.says)
	}
}

// TestParkForkOwner: a parked session keeps its owner's uid through a
// restart and a revive (by root, here); another user can neither see,
// revive, fork nor park it; a fork's branches are the parent's owner's.
// Through the CLI.
func TestParkForkOwner(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	openToAll(t, d)
	bin := nsboxCopy(t)
	out, err := asNobody(t, bin, d, "session", "create")
	if err != nil {
		t.Fatalf("session create as nobody: %v\n%s", err, out)
	}
	theirs := strings.TrimSpace(out)
	if out, err := asNobody(t, bin, d, "session", "exec", theirs, "x = 6 * 7"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := asNobody(t, bin, d, "session", "park", theirs); err != nil || !strings.Contains(out, "parked") {
		t.Fatalf("session park as nobody: %v\n%s", err, out)
	}
	if err := d.signal(t, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d.start(t)
	if err := os.Chmod(d.sock, 0o666); err != nil {
		t.Fatal(err)
	}
	r, err := d.client.ReviveSession(ctx, theirs)
	if err != nil || r.OwnerUID == nil || *r.OwnerUID != nobody {
		t.Fatalf("root revives nobody's session: %+v %v, want owner %d", r, err, nobody)
	}
	if out, err := asNobody(t, bin, d, "session", "exec", theirs, "print(x)"); err != nil || !strings.Contains(out, "42") {
		t.Fatalf("nobody's revived session: %v\n%s", err, out)
	}
	if out, err := asNobody(t, bin, d, "session", "fork", "--count", "2", theirs); err != nil || len(strings.Fields(out)) != 2 {
		t.Fatalf("session fork as nobody: %v\n%s", err, out)
	} else {
		for _, b := range strings.Fields(out) {
			if s, err := d.client.Session(ctx, b); err != nil || s.OwnerUID == nil || *s.OwnerUID != nobody {
				t.Errorf("branch %s: %+v %v, want owner %d", b, s, err, nobody)
			}
		}
	}

	mine := newSession(t, d, &agentapi.SessionRequest{})
	execOK(t, d, mine, "secret = 'root-key'")
	park(t, d, mine)
	for _, args := range [][]string{
		{"session", "revive", mine},
		{"session", "exec", mine, "print(secret)"},
		{"session", "fork", mine},
		{"session", "park", mine},
		{"session", "rm", mine},
	} {
		out, err := asNobody(t, bin, d, args...)
		if err == nil || strings.Contains(out, "root-key") || !strings.Contains(out, "not_found") {
			t.Errorf("nobody: nsbox %s: %v\n%s\nwant not_found", strings.Join(args, " "), err, out)
		}
	}
	if out, _ := asNobody(t, bin, d, "session", "ls", "--json"); strings.Contains(out, mine) {
		t.Errorf("nobody lists root's parked session:\n%s", out)
	}
	if g, err := d.client.Session(ctx, mine); err != nil || g.State != agentapi.SessionParked {
		t.Fatalf("root's parked session after nobody's tries: %+v %v", g, err)
	}
}

// TestSessionIdlePark: with idle_action "park" an idle session parks
// itself; its next exec revives it with its state. A Node session cannot
// ask for it.
func TestSessionIdlePark(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	id := newSession(t, d, &agentapi.SessionRequest{IdleTimeoutMs: 300, IdleAction: "park"})
	execOK(t, d, id, "y = 7")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s, err := d.client.Session(ctx, id)
		if err != nil {
			t.Fatalf("the idle session is gone: %v", err)
		}
		if s.State == agentapi.SessionParked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle session was not parked: %+v", s)
		}
	}
	if res := execOK(t, d, id, "y"); res.Value != "7" || !res.Revived {
		t.Fatalf("exec after the idle park: %q revived %v", res.Value, res.Revived)
	}
	if err := d.client.DeleteSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	_, err := d.client.CreateSession(ctx, &agentapi.SessionRequest{IdleAction: "nap"})
	wantFieldError(t, err, "idle_action")
}

// TestCarriedWorkspaceIsTheSessions: a fork's branch and a revived session
// get the workspace as the session left it, not the files of its creation
// request: an input file the session removed stays removed, one it
// changed keeps the change.
func TestCarriedWorkspaceIsTheSessions(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	id := newSession(t, d, &agentapi.SessionRequest{Files: []agentapi.File{{Path: "gone.txt", Text: "input"}, {Path: "kept.txt", Text: "input"}}})
	execOK(t, d, id, "import os\nos.remove('gone.txt')\nopen('kept.txt', 'w').write('changed')")
	const probe = "import os\n(os.path.exists('gone.txt'), open('kept.txt').read())"
	const want = "(False, 'changed')"
	out, err := d.client.ForkSession(ctx, id, 1)
	if err != nil {
		t.Fatalf("ForkSession: %v", err)
	}
	if got := execOK(t, d, out.Sessions[0].ID, probe).Value; got != want {
		t.Errorf("branch: %s, want %s", got, want)
	}
	park(t, d, id)
	if got := execOK(t, d, id, probe).Value; got != want {
		t.Errorf("revived: %s, want %s", got, want)
	}
}
