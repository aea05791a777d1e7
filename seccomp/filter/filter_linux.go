// Package filter installs a compiled seccomp program. It is separate from
// package seccomp, and free of cgo, so that the small sandbox init binary can
// install a filter without linking libseccomp.
package filter

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// insnSize is the size of one struct sock_filter; maxInsns is BPF_MAXINSNS.
const (
	insnSize = 8
	maxInsns = 4096
)

// ErrInvalid reports a program that is not a whole, non-empty array of at
// most 4096 instructions.
var ErrInvalid = errors.New("invalid seccomp program")

// Check reports whether prog is a plausible array of struct sock_filter.
func Check(prog []byte) error {
	switch n := len(prog) / insnSize; {
	case len(prog) == 0:
		return fmt.Errorf("%w: empty", ErrInvalid)
	case len(prog)%insnSize != 0:
		return fmt.Errorf("%w: %d bytes is not a whole number of %d-byte instructions", ErrInvalid, len(prog), insnSize)
	case n > maxInsns:
		return fmt.Errorf("%w: %d instructions, the kernel takes at most %d", ErrInvalid, n, maxInsns)
	}
	return nil
}

// Install sets no_new_privs and loads prog (struct sock_filter array, native
// byte order) with seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC),
// so every thread is filtered. Raw syscalls only; it is meant to run right
// before execve, and the filter must allow whatever runs between.
func Install(prog []byte) error {
	if err := Check(prog); err != nil {
		return err
	}
	filters := make([]unix.SockFilter, len(prog)/insnSize)
	for i := range filters {
		b := prog[i*insnSize:]
		filters[i] = unix.SockFilter{
			Code: binary.NativeEndian.Uint16(b[0:]),
			Jt:   b[2],
			Jf:   b[3],
			K:    binary.NativeEndian.Uint32(b[4:]),
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(filters)), Filter: &filters[0]}
	r1, _, errno := unix.RawSyscall(unix.SYS_SECCOMP,
		unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC,
		uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(filters)
	if errno != 0 {
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER): %w", errno)
	}
	if r1 != 0 {
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER): thread %d could not be synchronised (it has an incompatible filter)", r1)
	}
	return nil
}
