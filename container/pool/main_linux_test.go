package pool

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/nsbox/nsbox/container"
)

func TestMain(m *testing.M) {
	// Sandboxes re-execute this test binary as their init.
	container.MaybeInit()
	os.Exit(m.Run())
}

// testRootfs returns the rootfs the tests run in: NSBOX_TEST_ROOTFS or the
// store's "minimal" rootfs.
func testRootfs(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("NSBOX_TEST_ROOTFS")
	if dir == "" {
		dir = "/var/lib/nsbox/rootfs/minimal/rootfs"
	}
	if _, err := os.Stat(filepath.Join(dir, "usr/bin/python3")); err != nil {
		t.Skipf("no test rootfs with python3 at %s (build it: nsbox rootfs build --profile minimal --name minimal, or set NSBOX_TEST_ROOTFS): %v", dir, err)
	}
	return dir
}

func newEngine(t testing.TB) *container.Engine {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("requires root: the sandbox engine creates namespaces, cgroups and mounts")
	}
	name := fmt.Sprintf("nsbox-test-%d-%s", os.Getpid(), container.NewID()[:6])
	e, err := container.New(container.Config{RunDir: t.TempDir(), CgroupName: name})
	if err != nil {
		t.Fatalf("container.New: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}
