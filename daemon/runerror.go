package daemon

import (
	"context"
	"errors"
	"syscall"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/policy"
)

// runError is the error a run's caller gets for err: classify's, and for
// a command the kernel would not execute, a FieldError on the field that
// named it (argv, or the language whose command the rootfs cannot run).
func runError(j *policy.Job, err error) error {
	var ee *container.ExecError
	if !errors.Is(err, container.ErrBadCommand) || !errors.As(err, &ee) {
		return classify(err)
	}
	if j.Lang != nil {
		return errdefs.Field("language", "%s: the rootfs %s cannot execute its command %s: %v; use a rootfs that has it (GET /v1/info lists each rootfs's languages)",
			j.Language, j.Rootfs, ee.Path, ee.Errno)
	}
	if ee.Errno == syscall.E2BIG {
		return errdefs.Field("argv", "%s: %v: the arguments and environment are too long for the kernel; send long input as files or stdin", ee.Path, ee.Errno)
	}
	return errdefs.Field("argv", "%s: %v: %s; give a program in the rootfs, by name (looked up in PATH) or path, e.g. python3",
		ee.Path, ee.Errno, execHint(ee.Errno))
}

// execHint says what an execve errno means for the file the caller named.
func execHint(n syscall.Errno) string {
	switch n {
	case syscall.ENOENT:
		return "no such file in the sandbox (a relative path starts at /workspace)"
	case syscall.EACCES:
		return "not executable (a directory, a file without execute permission, or on a noexec mount)"
	case syscall.ENOEXEC:
		return "not a program the kernel can run (a script needs a #! line)"
	case syscall.ENOTDIR:
		return "a component of the path is not a directory"
	case syscall.EISDIR, syscall.ELIBBAD:
		return "its program interpreter cannot be run"
	}
	return "the kernel refused to execute it"
}

// ownFailure reports whether a run's err is the daemon's own failure (a
// sandbox it could not set up: nsbox_spawn_failures_total), not the
// caller's: a mistake of a class, or a caller that went away.
func ownFailure(ctx context.Context, err error) bool {
	return errdefs.Class(classify(err)) == nil && ctx.Err() == nil
}
