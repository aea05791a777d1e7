package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
)

// nobody is the second local user of TestSessionsBelongToTheirCaller
// (nobody:nogroup on Debian).
const nobody = 65534

// asNobody runs the nsbox CLI as uid/gid 65534 against d's socket.
func asNobody(t *testing.T, bin string, d *daemon, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"NSBOX_SOCKET=" + d.sock, "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// openToAll lets every local user, uid 65534 among them, reach d's socket.
func openToAll(t *testing.T, d *daemon) {
	t.Helper()
	for dir := filepath.Dir(d.sock); dir != "/" && dir != os.TempDir(); dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(d.sock, 0o666); err != nil {
		t.Fatal(err)
	}
}

// nsboxCopy is a copy of the test's nsbox binary that uid 65534 may run.
func nsboxCopy(t *testing.T) string {
	t.Helper()
	binDir := t.TempDir()
	bin := filepath.Join(binDir, "nsbox")
	data, err := os.ReadFile(nsboxBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for dir := binDir; dir != "/" && dir != os.TempDir(); dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// TestSessionsBelongToTheirCaller: a second local user who can reach the
// socket can neither see, use nor end another user's session; root sees
// every session with its owner, and so does a member of [sessions]
// admin_group once a reload names that group.
func TestSessionsBelongToTheirCaller(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "nsbox.conf")
	if err := os.WriteFile(conf, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "--config", conf)
	ctx := context.Background()

	// Let uid 65534 reach the socket and run a copy of the binary.
	for dir := filepath.Dir(d.sock); dir != "/" && dir != os.TempDir(); dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Before the socket is opened to it, nobody is told why it cannot
	// connect and what to do.
	for _, args := range [][]string{{"session", "ls"}, {"exec", "--", "true"}} {
		out, err := asNobody(t, nsboxCopy(t), d, args...)
		if err == nil || !strings.Contains(out, "permission denied") || !strings.Contains(out, "usermod -aG nsbox") {
			t.Errorf("nsbox %s as nobody on a 0660 root socket: %v\n%s\nwant a permission error naming the fix", strings.Join(args, " "), err, out)
		}
	}
	if err := os.Chmod(d.sock, 0o666); err != nil {
		t.Fatal(err)
	}
	bin := nsboxCopy(t)

	mine, err := d.client.CreateSession(ctx, &agentapi.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.Exec(ctx, mine.ID, &agentapi.ExecRequest{Code: "secret = 'root-api-key-123'"}); err != nil {
		t.Fatal(err)
	}
	if mine.OwnerUID == nil || *mine.OwnerUID != 0 {
		t.Errorf("root's session has owner %v, want uid 0", mine.OwnerUID)
	}

	listAs := func(t *testing.T) []agentapi.Session {
		t.Helper()
		out, err := asNobody(t, bin, d, "session", "ls", "--json")
		if err != nil {
			t.Fatalf("session ls as nobody: %v\n%s", err, out)
		}
		var l []agentapi.Session
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("session ls --json: %v\n%s", err, out)
		}
		return l
	}
	if got := listAs(t); len(got) != 0 {
		t.Errorf("nobody lists %+v, want none of root's sessions", got)
	}
	for _, args := range [][]string{
		{"session", "exec", mine.ID, "print(secret)"},
		{"session", "rm", mine.ID},
		{"session", "cp", mine.ID + ":x", "-"},
		{"session", "pause", mine.ID},
		{"session", "resume", mine.ID},
	} {
		out, err := asNobody(t, bin, d, args...)
		if err == nil || strings.Contains(out, "root-api-key") || !strings.Contains(out, "not_found") {
			t.Errorf("nobody: nsbox %s: %v\n%s\nwant a not_found error and no secret", strings.Join(args, " "), err, out)
		}
	}
	if s, err := d.client.Session(ctx, mine.ID); err != nil || s.State != agentapi.SessionIdle {
		t.Errorf("root's session after nobody's pause: %+v, %v; want it idle", s, err)
	}
	res, err := d.client.Exec(ctx, mine.ID, &agentapi.ExecRequest{Code: "print(secret)"})
	if err != nil || res.Stdout != "root-api-key-123\n" {
		t.Fatalf("root's session after nobody's tries: %+v, %v; want it alive and unchanged", res, err)
	}

	// nobody's own session: its own to use, listed for root with its owner.
	out, err := asNobody(t, bin, d, "session", "create")
	if err != nil {
		t.Fatalf("session create as nobody: %v\n%s", err, out)
	}
	theirs := strings.TrimSpace(out)
	if out, err := asNobody(t, bin, d, "session", "exec", theirs, "print(6*7)"); err != nil || !strings.Contains(out, "42") {
		t.Errorf("nobody's own session: %v\n%s", err, out)
	}
	all, err := d.client.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]uint32{}
	for _, s := range all {
		if s.OwnerUID != nil {
			owners[s.ID] = *s.OwnerUID
		}
	}
	if len(all) != 2 || owners[mine.ID] != 0 || owners[theirs] != nobody {
		t.Errorf("root lists %+v, want both sessions with owners 0 and %d", all, nobody)
	}

	// A reload that names nogroup as the admin group lets nobody see all.
	if err := os.WriteFile(conf, []byte("[sessions]\nadmin_group = \"nogroup\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload to apply", func() bool { return len(listAs(t)) == 2 })
}

// TestSocketReachableAfterRootExec: a root `nsbox exec` before the
// daemon's first start leaves the run dir 0700; the daemon started then
// must still be reachable by the users its socket lets in.
func TestSocketReachableAfterRootExec(t *testing.T) {
	top := t.TempDir()
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	for dir := filepath.Dir(top); dir != "/" && dir != os.TempDir(); dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	runDir := filepath.Join(top, "run")
	if err := os.Mkdir(runDir, 0o700); err != nil { // as the engine of a root exec made it
		t.Fatal(err)
	}
	d := startDaemonAt(t, filepath.Join(runDir, "nsbox.sock"), runDir)
	if err := os.Chmod(d.sock, 0o666); err != nil { // as if nobody were in the socket's group
		t.Fatal(err)
	}
	if out, err := asNobody(t, nsboxCopy(t), d, "session", "ls"); err != nil {
		t.Errorf("a user the socket lets in cannot reach it in a run dir a root exec made: %v\n%s", err, out)
	}
	if fi, err := os.Stat(runDir); err != nil || fi.Mode().Perm()&0o044 != 0 {
		t.Errorf("run dir mode %v (%v): it may be searched, not listed, by others", fi.Mode(), err)
	}
}
