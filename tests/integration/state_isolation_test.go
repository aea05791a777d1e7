package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
)

// TestForkedAndRevivedIsolation runs the escape probes in a fork's branch
// and in a parked-then-revived session: a sandbox made from another's
// state is as closed as any (uid 1000 without capabilities under seccomp,
// read-only rootfs, only lo, no namespaces or mounts, bounded processes
// and memory), and it cannot see the host's files, the parent's park files
// among them.
func TestForkedAndRevivedIsolation(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	canary := filepath.Join(t.TempDir(), "canary")
	if err := os.WriteFile(canary, []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	parent := newSession(t, d, &agentapi.SessionRequest{})
	execOK(t, d, parent, "x = 41")
	out, err := d.client.ForkSession(ctx, parent, 1)
	if err != nil || len(out.Sessions) != 1 {
		t.Fatalf("ForkSession: %+v %v", out, err)
	}
	branch := out.Sessions[0].ID
	park(t, d, parent)
	parkDir := d.parkDir()
	if _, err := d.client.ReviveSession(ctx, parent); err != nil {
		t.Fatalf("ReviveSession: %v", err)
	}
	hostFiles := fmt.Sprintf("import os\nprint([os.path.exists(p) for p in (%q, %q)], x + 1)", canary, parkDir)

	for _, c := range []struct{ what, id string }{{"branch", branch}, {"revived", parent}} {
		t.Run(c.what, func(t *testing.T) {
			if res := execOK(t, d, c.id, hostFiles); strings.TrimSpace(res.Stdout) != "[False, False] 42" {
				t.Errorf("host files seen from the %s session, or its state lost: %q", c.what, res.Stdout)
			}
			for _, p := range escapeProbes {
				res, err := d.client.Exec(ctx, c.id, &agentapi.ExecRequest{Code: p.code})
				if err != nil {
					t.Fatalf("%s: %v", p.name, err)
				}
				if res.Status != p.status || !strings.Contains(res.Stdout, p.stdout) {
					t.Errorf("%s: status %q stdout %q exception %+v; want %q with %q", p.name, res.Status, trimOut(res.Stdout), res.Exception, p.status, p.stdout)
				}
			}
			if s, err := d.client.Session(ctx, c.id); err != nil || s.State != agentapi.SessionDead {
				t.Errorf("after the memory bomb: %+v %v; want dead", s, err)
			}
		})
	}
	for _, id := range []string{branch, parent} {
		if err := d.client.DeleteSession(ctx, id); err != nil {
			t.Error(err)
		}
	}
	if err := d.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
	d.assertClean(t)
}
