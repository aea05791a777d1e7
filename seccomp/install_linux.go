package seccomp

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Install sets no_new_privs and loads p into the calling process with
// seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC), so every
// thread is filtered. It uses raw syscalls only (no cgo, no libseccomp) and
// is meant to run right before execve; the filter must allow whatever
// runs between.
func (p Program) Install() error {
	if err := p.check(); err != nil {
		return err
	}
	n := p.Len()
	filters := make([]unix.SockFilter, n)
	for i := range filters {
		in := p.insn(i)
		filters[i] = unix.SockFilter{Code: in.code, Jt: in.jt, Jf: in.jf, K: in.k}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(n), Filter: &filters[0]}
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
