// Package integration holds nsbox's end-to-end tests: they build the nsbox
// binary, start real daemons on temp sockets and drive them through the Go
// client and raw HTTP. They need root and a built rootfs.
package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/nsbox/nsbox/tests/internal/testdaemon"
)

// nsboxBin is the binary TestMain built; buildErr says why there is none.
var (
	nsboxBin string
	buildErr error
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "nsbox-it-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if os.Geteuid() == 0 {
		nsboxBin, buildErr = testdaemon.Build(filepath.Join("..", ".."), dir)
	}
	return m.Run()
}
