package envd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nsbox/nsbox/agentapi/e2b/envd/filesystem"
	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// Paths outside the workspace are served by the sandbox's process agent,
// which runs in the sandbox as its user: it opens, lists, makes, renames
// and removes there, with the kernel checking the sandbox's own mounts
// and the user's permissions, so the read-only rootfs reads but does not
// write, /tmp and /dev/shm (the sandbox's size-capped tmpfs) write, and
// no path, symlink or /proc/*/root can lead to a host file: the host
// resolves none of them (docs/SECURITY.md).

// agent is the process agent of a request's sandbox.
func (s *server) agent(ctx context.Context) (*procs.Agent, error) {
	a, err := s.core.Processes(ctx, s.id(ctx))
	return a, fileError(err)
}

// inSandbox runs op on the request's sandbox's agent; its error gets its
// class (fileError).
func (s *server) inSandbox(ctx context.Context, op func(*procs.Agent) error) error {
	a, err := s.agent(ctx)
	if err != nil {
		return err
	}
	return fileError(op(a))
}

// retryInSandbox reports whether a workspace operation's error may have
// another answer in the sandbox: the workspace's operations follow no
// symlink (a symlink on the path is an invalid argument), the sandbox's
// user does, as envd does. The agent's answer is then the answer.
func retryInSandbox(err error) bool { return errors.Is(err, errdefs.ErrInvalidArgument) }

// fileError gives an agent file operation's error its class, as envd
// answers them: a missing path is not found, an existing one exists, a
// full tmpfs is no space, a wrong kind of file is an invalid argument. A
// change on a read-only filesystem (EROFS: the rootfs, or a volume
// mounted read-only) is an invalid argument too, saying where writes go:
// envd's root is writable, so E2B never answers one, and a 500 would
// blame the sandbox. Another permission error (EACCES, EPERM: root's
// files) stays unclassified, a 500 or Connect "internal" with the
// kernel's words, as envd's own are.
func fileError(err error) error {
	var fe *procs.FileError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		switch fe.Errno {
		case unix.ENOENT:
			return errdefs.In(errdefs.ErrNotFound, err)
		case unix.EEXIST, unix.ENOTEMPTY:
			return errdefs.In(errdefs.ErrExists, err)
		case unix.ENOSPC, unix.EDQUOT:
			return errdefs.In(errdefs.ErrNoSpace, err)
		case unix.EISDIR, unix.ENOTDIR, unix.EINVAL, unix.E2BIG, unix.ENAMETOOLONG, unix.ELOOP, unix.EXDEV:
			return errdefs.In(errdefs.ErrInvalidArgument, err)
		case unix.EROFS:
			return errdefs.In(errdefs.ErrInvalidArgument, fmt.Errorf("%w (the sandbox's root filesystem, or a volume mounted read-only): write under %s (the workspace), /tmp or /dev/shm", err, Home))
		case unix.EMFILE:
			return errdefs.In(errdefs.ErrExhausted, err)
		}
	case errors.Is(err, procs.ErrClosed):
		return errdefs.In(errdefs.ErrUnavailable, err)
	}
	return err
}

// goFileMode is the os.FileMode of a stat's st_mode, type bits included.
func goFileMode(m uint32) os.FileMode {
	mode := goMode(m)
	switch m & syscall.S_IFMT {
	case syscall.S_IFDIR:
		mode |= os.ModeDir
	case syscall.S_IFLNK:
		mode |= os.ModeSymlink
	case syscall.S_IFIFO:
		mode |= os.ModeNamedPipe
	case syscall.S_IFSOCK:
		mode |= os.ModeSocket
	case syscall.S_IFCHR:
		mode |= os.ModeDevice | os.ModeCharDevice
	case syscall.S_IFBLK:
		mode |= os.ModeDevice
	}
	return mode
}

// entryType is envd's type of an st_mode: file, directory or unknown.
func entryType(m uint32) filesystem.FileType {
	switch m & syscall.S_IFMT {
	case syscall.S_IFREG:
		return filesystem.FileType_FILE_TYPE_FILE
	case syscall.S_IFDIR:
		return filesystem.FileType_FILE_TYPE_DIRECTORY
	}
	return filesystem.FileType_FILE_TYPE_UNSPECIFIED
}

// agentEntryInfo is an entry the agent described as envd's EntryInfo
// (entryInfo's rules): a symlink by where it leads, its own path as its
// target when it leads nowhere.
func agentEntryInfo(e procs.FileEntry) *filesystem.EntryInfo {
	mode := goFileMode(e.Mode)
	typ, perm := entryType(e.Mode), mode.Perm()
	out := &filesystem.EntryInfo{
		Name: e.Name, Path: e.Path, Size: e.Size, Permissions: mode.String(),
		Owner: e.Owner, Group: e.Group, ModifiedTime: timestamppb.New(e.ModTime()),
		Metadata: e.Meta,
	}
	if e.IsSymlink() {
		typ, perm = filesystem.FileType_FILE_TYPE_UNSPECIFIED, 0
		to := e.Path
		if e.Target != "" {
			typ, perm, to = entryType(e.TargetMode), goMode(e.TargetMode).Perm(), e.Target
		}
		out.SymlinkTarget = &to
	}
	out.Type, out.Mode = typ, uint32(perm)
	return out
}
