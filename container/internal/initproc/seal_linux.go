package initproc

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/opencontainers/runc/libcontainer/exeseal"
	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container/sandboxinit"
)

// Seal returns a sealed copy of the init binary at path to exec, and the
// path it was copied from ("" for this executable). An empty path means
// sandboxinit.Arg0 next to this executable when there is one, else this
// executable itself.
//
// CVE-2019-5736: the sandbox must never be able to reach (and rewrite) the
// binary that runs as init; it execs a sealed copy instead.
func Seal(path, tmpDir string) (*os.File, string, error) {
	if path == "" {
		if exe, err := os.Executable(); err == nil {
			cand := filepath.Join(filepath.Dir(exe), sandboxinit.Arg0)
			if st, err := os.Stat(cand); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
				path = cand
			}
		}
	}
	var sealed *os.File
	if path == "" {
		self, err := exeseal.CloneSelfExe(tmpDir)
		if err != nil {
			return nil, "", fmt.Errorf("seal a copy of the nsbox binary: %w", err)
		}
		sealed = self
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, "", fmt.Errorf("sandbox init binary: %w", err)
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return nil, "", fmt.Errorf("sandbox init binary: %w", err)
		}
		if sealed, err = exeseal.CloneBinary(f, st.Size(), path, tmpDir); err != nil {
			return nil, "", fmt.Errorf("seal a copy of %s: %w", path, err)
		}
	}
	// Without overlayfs exeseal falls back to a sealed memfd copy, created
	// 0700 by root: init runs as a mapped uid and must be able to exec it.
	// (The overlayfs variant is an O_PATH fd: fchmod fails, harmlessly.)
	_ = unix.Fchmod(int(sealed.Fd()), 0o555)
	return sealed, path, nil
}
