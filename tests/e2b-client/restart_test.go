package e2bclient

import (
	"context"
	"os"
	"os/exec"
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
	d := testdaemon.New(t, bin, "nsbox-e2b-restart-", "--default-rootfs", datasci, "--e2b-listen", addr, "--e2b-keys", keys)
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
	d.Start(t)
	if got := run("resume", id); got != "resumed" {
		t.Fatalf("resume printed %q", got)
	}
	waitNoSessions(t, d)
}
