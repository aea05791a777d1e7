package seccomp

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// runningKernel returns the major.minor of the running kernel.
func runningKernel() (kernelVersion, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return kernelVersion{}, fmt.Errorf("uname: %w", err)
	}
	return parseKernelVersion(unix.ByteSliceToString(u.Release[:]))
}
