package session

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/internal/testenv"
	"github.com/nsbox/nsbox/container/runner"
)

func TestMain(m *testing.M) {
	// Sandboxes re-execute this test binary as their init.
	container.MaybeInit()
	os.Exit(m.Run())
}

// newManager returns a Manager on a fresh engine; at cleanup it closes both
// and checks the engine's cgroup parent is gone.
func newManager(t testing.TB, cfg Config) (*Manager, string) {
	t.Helper()
	testenv.RequireRoot(t)
	name := testenv.CgroupName()
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
		opts.RootfsDir = testenv.Rootfs(t)
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
