//go:build !cgo

package initproc

import (
	"os"
	"os/exec"
)

// startProcess starts cmd with cmd.Start: without cgo there is no vfork
// clone (clone_cgo_linux.go).
func startProcess(cmd *exec.Cmd) (*os.Process, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd.Process, nil
}
