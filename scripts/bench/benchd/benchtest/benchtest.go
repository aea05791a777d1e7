// Package benchtest is what the bench sections' tiny tests share: the
// rootfs their private daemons run in and nsbox built from this tree.
package benchtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Setup skips t unless it runs as root and the test rootfs is there
// (NSBOX_TEST_ROOTFS_NAME in NSBOX_TEST_ROOTFS_STORE; minimal in
// /var/lib/nsbox/rootfs by default), then builds nsbox and nsbox-init from
// this tree into a temp dir. It returns nsbox's path, the store and the
// rootfs's name: benchd.Start's first three arguments.
func Setup(t testing.TB) (nsbox, store, name string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("requires root: the bench's daemons run sandboxes")
	}
	store = os.Getenv("NSBOX_TEST_ROOTFS_STORE")
	if store == "" {
		store = "/var/lib/nsbox/rootfs"
	}
	name = os.Getenv("NSBOX_TEST_ROOTFS_NAME")
	if name == "" {
		name = "minimal"
	}
	if _, err := os.Stat(filepath.Join(store, name, "rootfs")); err != nil {
		t.Skipf("requires the rootfs %q in %s: %v", name, store, err)
	}
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" {
		t.Fatalf("go env GOMOD: %v (%q): the tree to build nsbox from", err, gomod)
	}
	dir := t.TempDir()
	for _, pkg := range []string{"nsbox", "nsbox-init"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, pkg), "./cmd/"+pkg)
		cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return filepath.Join(dir, "nsbox"), store, name
}
