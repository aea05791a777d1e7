// Package integration holds nsbox's end-to-end tests: they build the nsbox
// binary, start real daemons on temp sockets and drive them through the Go
// client and raw HTTP. They need root and a built rootfs.
package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
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
		// nsbox-init next to nsbox, as `make install` lays them out: the
		// daemon execs it as every sandbox's init.
		nsboxBin = filepath.Join(dir, "nsbox")
		for _, b := range []struct{ out, pkg string }{{nsboxBin, "./cmd/nsbox"}, {filepath.Join(dir, "nsbox-init"), "./cmd/nsbox-init"}} {
			cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
			cmd.Dir = filepath.Join("..", "..")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
				break
			}
		}
	}
	return m.Run()
}
