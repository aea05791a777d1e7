package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/runner"
)

func TestMain(m *testing.M) {
	// Sandboxes re-execute this test binary as their init.
	container.MaybeInit()
	os.Exit(m.Run())
}

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

// newManager returns a Manager on a fresh engine; at cleanup it closes both
// and checks the engine's cgroup parent is gone.
func newManager(t testing.TB, cfg Config) (*Manager, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("requires root: the sandbox engine creates namespaces, cgroups and mounts")
	}
	name := fmt.Sprintf("nsbox-test-%d-%s", os.Getpid(), container.NewID()[:6])
	e, err := container.New(container.Config{RunDir: t.TempDir(), CgroupName: name})
	if err != nil {
		t.Fatalf("container.New: %v", err)
	}
	cfg.Starter = e
	m := New(cfg)
	t.Cleanup(func() {
		m.Close()
		e.Close()
	})
	return m, name
}

func create(t testing.TB, m *Manager, opts Options) *Session {
	t.Helper()
	if opts.RootfsDir == "" {
		opts.RootfsDir = testRootfs(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := m.Create(ctx, opts)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return s
}

func run(t testing.TB, s *Session, code string) *ExecResult {
	t.Helper()
	res, err := s.Exec(context.Background(), runner.ExecRequest{Code: code, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("Exec(%q): %v", code, err)
	}
	return res
}

// cgroupDirs lists the engine's sandbox cgroups (memory hierarchy or v2).
func cgroupDirs(t testing.TB, name string) []string {
	t.Helper()
	var out []string
	for _, pat := range []string{"/sys/fs/cgroup/memory/*/" + name + "/*", "/sys/fs/cgroup/memory/" + name + "/*", "/sys/fs/cgroup/*/" + name + "/*", "/sys/fs/cgroup/" + name + "/*"} {
		m, _ := filepath.Glob(pat)
		for _, d := range m {
			if st, err := os.Stat(d); err == nil && st.IsDir() {
				out = append(out, d)
			}
		}
	}
	return out
}
