// Package testenv is what every test that runs nsbox binaries needs,
// beyond tests/ too (the bench sections' tiny tests under scripts/, which
// cannot import tests/internal): nsbox built from the tree, and the
// rootfs the tests run on.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
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

// SkipWithoutTmpfsUserXattrs skips t unless a tmpfs keeps user extended
// attributes (kernel 6.6 and later), as the sandboxes' workspace must for
// file metadata: it mounts a tmpfs of its own on a temp dir, sets one on a
// file there, and unmounts it; without root it skips.
func SkipWithoutTmpfsUserXattrs(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("requires root: the probe mounts a tmpfs (and the test runs sandboxes)")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=64k"); err != nil {
		t.Fatalf("mount a tmpfs to probe its user xattrs: %v", err)
	}
	defer func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount the probe tmpfs %s: %v", dir, err)
		}
	}()
	f := filepath.Join(dir, "probe")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(f, "user.e2b.probe", []byte("x"), 0); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			t.Skipf("this kernel's tmpfs keeps no user extended attributes (kernel 6.6 and later do), so sandboxes keep no file metadata: %v", err)
		}
		t.Fatalf("setxattr on the probe tmpfs: %v", err)
	}
}
