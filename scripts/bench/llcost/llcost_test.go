package llcost

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/sandboxinit"
)

// TestRunTiny runs the section at its smallest scale through real private
// daemons (nsbox and nsbox-init built from this tree) so that it cannot
// rot: every path is measured on both sides, each daemon took the path
// its row names (Run checks each answer's pooled flag), and the figures
// are there.
func TestRunTiny(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("requires root: the bench's daemons run sandboxes")
	}
	if sandboxinit.LandlockABI() == 0 {
		t.Skip("this kernel has no Landlock: the section has nothing to compare")
	}
	store := os.Getenv("NSBOX_TEST_ROOTFS_STORE")
	if store == "" {
		store = "/var/lib/nsbox/rootfs"
	}
	name := os.Getenv("NSBOX_TEST_ROOTFS_NAME")
	if name == "" {
		name = "minimal"
	}
	if _, err := os.Stat(filepath.Join(store, name, "rootfs")); err != nil {
		t.Skipf("requires the rootfs %q in %s: %v", name, store, err)
	}
	dir := t.TempDir()
	for _, pkg := range []string{"nsbox", "nsbox-init"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, pkg), "./cmd/"+pkg)
		cmd.Dir = filepath.Join("..", "..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a hang, not a slow machine (Idle waits up to 30 s for a quiet CPU, six times)
	defer cancel()
	rows, _, err := Run(ctx, Options{Nsbox: filepath.Join(dir, "nsbox"), Store: store, Rootfs: name, Runs: Blocks})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"cold", "zygote, forked", "zygote, pre-forked"}
	if len(rows) != len(want) {
		t.Fatalf("rows %+v, want %d", rows, len(want))
	}
	for i, r := range rows {
		if !strings.HasPrefix(r.Path, want[i]) || r.Runs != Blocks || r.OnP50 <= 0 || r.OffP50 <= 0 ||
			r.Ratio <= 0 || r.Low <= 0 || r.Low > r.High {
			t.Errorf("row %d: %+v, want %q with figures on both sides", i, r, want[i])
		}
	}
}

func TestRunNeedsBlocks(t *testing.T) {
	_, _, err := Run(context.Background(), Options{Runs: Blocks - 1})
	if err == nil || !strings.Contains(err.Error(), "at least 5") {
		t.Fatalf("Run with %d runs: %v, want the --runs error", Blocks-1, err)
	}
}
