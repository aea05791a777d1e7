package container

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// Sandboxes re-execute this test binary as their init.
	MaybeInit()
	os.Exit(m.Run())
}
