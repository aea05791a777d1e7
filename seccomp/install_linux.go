package seccomp

import "github.com/nsbox/nsbox/seccomp/filter"

// Install sets no_new_privs and loads p into the calling process with
// seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC), so every
// thread is filtered. It uses raw syscalls only (no cgo, no libseccomp: see
// package filter) and is meant to run right before execve; the filter must
// allow whatever runs between.
func (p Program) Install() error {
	if err := p.check(); err != nil {
		return err
	}
	return filter.Install(p)
}
