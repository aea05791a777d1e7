package pool

import (
	"os"
	"testing"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/internal/testenv"
)

func TestMain(m *testing.M) {
	// Sandboxes re-execute this test binary as their init.
	container.MaybeInit()
	os.Exit(m.Run())
}

func newEngine(t testing.TB) *container.Engine {
	t.Helper()
	testenv.RequireRoot(t)
	name := testenv.CgroupName()
	e, err := container.New(container.Config{RunDir: t.TempDir(), CgroupName: name})
	if err != nil {
		t.Fatalf("container.New: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}
