package e2bclient

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/tests/internal/testdaemon"
)

// TestE2BPausedAcrossRestart: a sandbox paused through the SDK is still
// its key's after the daemon restarts (SIGTERM, start again on the same
// state directory and keys file): another key cannot reach it, its own
// connects and finds its file and its Python variable.
func TestE2BPausedAcrossRestart(t *testing.T) {
	pausedAcrossRestart(t, nil)
}

// TestE2BPausedMigrated: a sandbox paused by an older daemon, whose
// endpoint kept its record in <state_dir>/e2b/<id>.json beside the
// parked session, is its key's after an upgraded daemon starts: the
// record moves into the session's record.json and its file goes.
func TestE2BPausedMigrated(t *testing.T) {
	pausedAcrossRestart(t, func(t *testing.T, state, id string) {
		// Make the older daemon's layout from this one's: the record
		// out of record.json's "meta", into the endpoint's own file.
		recFile := filepath.Join(state, "sessions", id, "record.json")
		var rec map[string]json.RawMessage
		readJSON(t, recFile, &rec)
		var meta struct {
			E2B json.RawMessage `json:"e2b"`
		}
		if err := json.Unmarshal(rec["meta"], &meta); err != nil || len(meta.E2B) == 0 {
			t.Fatalf("record.json's meta %s: %v, want the sandbox's record", rec["meta"], err)
		}
		delete(rec, "meta")
		writeJSON(t, recFile, rec)
		if err := os.MkdirAll(filepath.Join(state, "e2b"), 0o700); err != nil {
			t.Fatal(err)
		}
		writeJSON(t, filepath.Join(state, "e2b", id+".json"), meta.E2B)
	}, func(t *testing.T, state, id string) {
		if _, err := os.Stat(filepath.Join(state, "e2b")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the older daemon's record directory after the start: %v, want it gone", err)
		}
	})
}

func readJSON(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func writeJSON(t *testing.T, name string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err == nil {
		err = os.WriteFile(name, b, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// pausedAcrossRestart pauses a sandbox through the SDK, stops the daemon,
// calls stopped (when set) with its state directory and the sandbox's id,
// starts it again, calls started (when set), and resumes the sandbox
// through the SDK.
func pausedAcrossRestart(t *testing.T, stopped func(t *testing.T, state, id string), started ...func(t *testing.T, state, id string)) {
	if testing.Short() {
		t.Skip("drives a real daemon and sandboxes; not in -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("requires root: the daemon runs sandboxes")
	}
	node, dir := nodeClient(t)
	datasci := testdaemon.DataSciRootfs(t)
	bin, err := testdaemon.Build("../..", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	key, other, keys := keyFile(t)
	addr := freeLoopback(t)
	state := filepath.Join(t.TempDir(), "state")
	d := testdaemon.New(t, bin, "nsbox-e2b-restart-", "--default-rootfs", datasci, "--e2b-listen", addr, "--e2b-keys", keys, "--state-dir", state)
	d.Start(t)

	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, append([]string{"restart.mjs"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(withoutE2B(os.Environ()), "E2B_API_URL=http://"+addr, "E2B_SANDBOX_URL=http://"+addr,
			"E2B_API_KEY="+key, "NSBOX_E2B_OTHER_KEY="+other, "NO_COLOR=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("node restart.mjs %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return lines[len(lines)-1]
	}
	id := run("pause")
	if err := d.Signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
	if stopped != nil {
		stopped(t, state, id)
	}
	d.Start(t)
	for _, f := range started {
		f(t, state, id)
	}
	if got := run("resume", id); got != "resumed" {
		t.Fatalf("resume printed %q", got)
	}
	waitNoSessions(t, d)
}
