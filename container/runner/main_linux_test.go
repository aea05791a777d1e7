package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

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

// dataSciRootfs returns the data-science rootfs or skips.
func dataSciRootfs(t testing.TB) string {
	t.Helper()
	name := os.Getenv("NSBOX_TEST_DATASCI_ROOTFS_NAME")
	if name == "" {
		name = "default"
	}
	dir := filepath.Join("/var/lib/nsbox/rootfs", name, "rootfs")
	if _, err := os.Stat(filepath.Join(dir, "usr/lib/python3/dist-packages/matplotlib")); err != nil {
		t.Skipf("no data-science rootfs %q with matplotlib at %s (build it: nsbox rootfs build --profile default --name %s): %v", name, dir, name, err)
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

// startRunner starts a runner on rootfs dir and closes it at cleanup.
func startRunner(t testing.TB, e *container.Engine, dir string, tweak ...func(*container.Spec)) *Runner {
	t.Helper()
	spec := container.Spec{RootfsDir: dir, Limits: container.Limits{Timeout: 10 * time.Minute, OutputBytes: 64 << 20}}
	for _, f := range tweak {
		f(&spec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := Start(ctx, e, spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func exec(t testing.TB, r *Runner, code string) *Result {
	t.Helper()
	return execReq(t, r, ExecRequest{Code: code, Timeout: time.Minute})
}

func execReq(t testing.TB, r *Runner, req ExecRequest) *Result {
	t.Helper()
	res, err := r.Exec(context.Background(), req)
	if err != nil {
		t.Fatalf("Exec(%q): %v", req.Code, err)
	}
	return res
}
