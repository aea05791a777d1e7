// Package testenv is what every test that runs nsbox binaries needs,
// beyond tests/ too (the bench sections' tiny tests under scripts/, which
// cannot import tests/internal): nsbox built from the tree, and the
// rootfs the tests run on.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Build builds nsbox and, next to it as `make install` lays them out,
// nsbox-init (the daemon execs it as every sandbox's init) into dir from
// the module at root, and returns the nsbox binary's path.
func Build(root, dir string) (string, error) {
	bin := filepath.Join(dir, "nsbox")
	for _, b := range []struct{ out, pkg string }{{bin, "./cmd/nsbox"}, {filepath.Join(dir, "nsbox-init"), "./cmd/nsbox-init"}} {
		cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	return bin, nil
}

// Rootfs returns the rootfs store and name the tests run on
// (NSBOX_TEST_ROOTFS_STORE, NSBOX_TEST_ROOTFS_NAME), skipping when absent.
func Rootfs(t testing.TB) (store, name string) {
	t.Helper()
	store = os.Getenv("NSBOX_TEST_ROOTFS_STORE")
	if store == "" {
		store = "/var/lib/nsbox/rootfs"
	}
	name = os.Getenv("NSBOX_TEST_ROOTFS_NAME")
	if name == "" {
		name = "minimal"
	}
	if _, err := os.Stat(filepath.Join(store, name, "rootfs")); err != nil {
		t.Skipf("requires the rootfs %q in %s (build it with `nsbox rootfs build --profile minimal --name %s`, or set NSBOX_TEST_ROOTFS_STORE/NSBOX_TEST_ROOTFS_NAME): %v", name, store, name, err)
	}
	return store, name
}
