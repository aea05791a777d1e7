// Package testenv holds what the engine's test suites share: where the test
// rootfs trees are, and skipping cleanly when they, or root, are missing.
package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// StoreRoot is where `make test` builds the rootfs trees.
const StoreRoot = "/var/lib/nsbox/rootfs"

// RequireRoot skips the test, saying why, unless it runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("requires root: the sandbox engine creates namespaces, cgroups and mounts")
	}
}

// Rootfs returns the rootfs tree most tests run in: NSBOX_TEST_ROOTFS (a
// directory) or the store's "minimal" rootfs; it skips when python3 is not
// in it.
func Rootfs(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("NSBOX_TEST_ROOTFS")
	if dir == "" {
		dir = filepath.Join(StoreRoot, "minimal", "rootfs")
	}
	if _, err := os.Stat(filepath.Join(dir, "usr/bin/python3")); err != nil {
		t.Skipf("no test rootfs with python3 at %s (build it: nsbox rootfs build --profile minimal --name minimal, or set NSBOX_TEST_ROOTFS): %v", dir, err)
	}
	return dir
}

// DataSciRootfs returns the data-science rootfs (NSBOX_TEST_DATASCI_ROOTFS_NAME
// in the store NSBOX_TEST_ROOTFS_STORE or StoreRoot, default "default"); it
// skips when matplotlib is not in it.
func DataSciRootfs(t testing.TB) string {
	t.Helper()
	name, dir := storeTree("NSBOX_TEST_DATASCI_ROOTFS_NAME", "default")
	if _, err := os.Stat(filepath.Join(dir, "usr/lib/python3/dist-packages/matplotlib")); err != nil {
		t.Skipf("no data-science rootfs %q with matplotlib at %s (build it: nsbox rootfs build --profile datasci --name %s): %v", name, dir, name, err)
	}
	return dir
}

// CgroupName is a cgroup parent name unique to this test process and call,
// so suites running at once never touch each other's sandboxes.
func CgroupName() string {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return fmt.Sprintf("nsbox-test-%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
}

// NodeRootfs returns a rootfs tree with Node.js: NSBOX_TEST_NODE_ROOTFS (a
// directory), else the store's data-science rootfs
// (NSBOX_TEST_DATASCI_ROOTFS_NAME, default "default"), whose profile has
// Node.js; it skips when /usr/bin/node is not in it.
func NodeRootfs(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("NSBOX_TEST_NODE_ROOTFS")
	if dir == "" {
		name := os.Getenv("NSBOX_TEST_DATASCI_ROOTFS_NAME")
		if name == "" {
			name = "default"
		}
		dir = filepath.Join(StoreRoot, name, "rootfs")
	}
	if _, err := os.Stat(filepath.Join(dir, "usr/bin/node")); err != nil {
		t.Skipf("no test rootfs with node at %s (make rootfs-default builds the datasci profile, which has Node.js; or set NSBOX_TEST_NODE_ROOTFS): %v", dir, err)
	}
	return dir
}

// PolyglotRootfs returns the rootfs of the polyglot profile, which has R
// and Java: NSBOX_TEST_POLYGLOT_ROOTFS_NAME (default "polyglot") in the
// store NSBOX_TEST_ROOTFS_STORE or StoreRoot; it skips when Rscript or
// jshell is not in it.
func PolyglotRootfs(t testing.TB) string {
	t.Helper()
	name, dir := storeTree("NSBOX_TEST_POLYGLOT_ROOTFS_NAME", "polyglot")
	for _, f := range []string{"usr/bin/Rscript", "usr/bin/jshell"} {
		if _, err := os.Lstat(filepath.Join(dir, f)); err != nil {
			t.Skipf("no polyglot rootfs %q with R and Java at %s (make rootfs-polyglot builds it): %v", name, dir, err)
		}
	}
	return dir
}

// storeTree is the rootfs named by the variable nameVar (def when unset)
// in the store NSBOX_TEST_ROOTFS_STORE (StoreRoot when unset): its name
// and its tree.
func storeTree(nameVar, def string) (name, dir string) {
	name = os.Getenv(nameVar)
	if name == "" {
		name = def
	}
	store := os.Getenv("NSBOX_TEST_ROOTFS_STORE")
	if store == "" {
		store = StoreRoot
	}
	return name, filepath.Join(store, name, "rootfs")
}
