// Package benchtest is what the bench sections' tiny tests share: the
// rootfs their private daemons run in and nsbox built from this tree.
package benchtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/tests/testenv"
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
	store, name = testenv.Rootfs(t)
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" {
		t.Fatalf("go env GOMOD: %v (%q): the tree to build nsbox from", err, gomod)
	}
	nsbox, err = testenv.Build(filepath.Dir(strings.TrimSpace(string(gomod))), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return nsbox, store, name
}
