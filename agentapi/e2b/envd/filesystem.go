package envd

import (
	"context"
	"errors"
	"os"
	"path"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/e2b/envd/filesystem"
	"github.com/nsbox/nsbox/agentapi/e2b/envd/filesystem/filesystemconnect"
	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// filesystemService is envd's filesystem.Filesystem: a path in the
// session's workspace goes through the core's beneath-the-workspace,
// no-symlink-following file operations, any other through the sandbox's
// process agent, inside the sandbox as its user (anywhere.go).
type filesystemService struct {
	filesystemconnect.UnimplementedFilesystemHandler
	s *server
}

var _ filesystemconnect.FilesystemHandler = (*filesystemService)(nil)

// entryInfo converts a workspace entry as envd's EntryInfo reads one
// (its shared/pkg/filesystem GetEntryInfo): mode is the permission bits
// alone (0o755, never Go's type bits); permissions is Go's FileMode
// string of the entry itself ("drwxr-xr-x", a symlink's "Lrwxrwxrwx");
// size is lstat's, a directory's too. A symlink (to, from resolve) is
// described by what it resolves to: that entry's type and permission
// bits, and symlink_target its path; one that does not resolve has no
// type and mode 0.
func entryInfo(f agentapi.WorkspaceFile, to *symlinkEnd) *filesystem.EntryInfo {
	mode := goMode(f.Mode)
	typ, perm := filesystem.FileType_FILE_TYPE_FILE, mode.Perm()
	switch {
	case f.Dir:
		typ, mode = filesystem.FileType_FILE_TYPE_DIRECTORY, mode|os.ModeDir
	case f.Symlink:
		typ, mode, perm = filesystem.FileType_FILE_TYPE_UNSPECIFIED, mode|os.ModeSymlink, 0
		if to != nil && to.entry != nil {
			typ, perm = filesystem.FileType_FILE_TYPE_FILE, goMode(to.entry.Mode).Perm()
			if to.entry.Dir {
				typ = filesystem.FileType_FILE_TYPE_DIRECTORY
			}
		}
	}
	e := &filesystem.EntryInfo{
		Name: path.Base(sandboxPath(f.Path)), Type: typ, Path: sandboxPath(f.Path), Size: f.Size,
		Mode: uint32(perm), Permissions: mode.String(), Owner: "user", Group: "user",
		ModifiedTime: timestamppb.New(f.ModTime),
	}
	if f.Symlink && to != nil {
		e.SymlinkTarget = &to.path
	}
	return e
}

// goMode is the os.FileMode of a stat's permission, setuid, setgid and
// sticky bits, as os.Lstat gives them to envd.
func goMode(m uint32) os.FileMode {
	mode := os.FileMode(m & 0o777)
	if m&unix.S_ISUID != 0 {
		mode |= os.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= os.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= os.ModeSticky
	}
	return mode
}

// symlinkEnd is where a symlink leads: the sandbox path envd reports as
// its symlink_target, and the entry there (nil when it does not resolve).
type symlinkEnd struct {
	path  string
	entry *agentapi.WorkspaceFile
}

// maxHops is the kernel's bound on the symlinks one lookup follows
// (ELOOP past it).
const maxHops = 40

// resolve follows the symlink f as envd does (filepath.EvalSymlinks,
// then a stat of the end), through the workspace's no-follow file
// operations one link at a time. One that leads out of the workspace, or
// through a symlinked directory (which those operations refuse), is
// followed from there by the agent, inside the sandbox. A link that does
// not resolve (missing, a loop) reads as envd's: its own path, no entry.
func (fs *filesystemService) resolve(ctx context.Context, f agentapi.WorkspaceFile) *symlinkEnd {
	broken := &symlinkEnd{path: sandboxPath(f.Path)}
	cur := f
	for range maxHops {
		target := cur.SymlinkTarget
		if target == "" {
			return broken
		}
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(sandboxPath(cur.Path)), target)
		}
		target = path.Clean(target)
		rel, err := workspacePath("target", target)
		if err != nil {
			if end := fs.resolveOutside(ctx, target); end != nil {
				return end
			}
			return broken
		}
		next, err := fs.s.core.StatFile(ctx, fs.s.id(ctx), rel)
		if err != nil {
			if end := fs.resolveOutside(ctx, target); end != nil && end.entry != nil {
				return end // through a symlinked directory, as the sandbox sees it
			}
			return broken
		}
		if !next.Symlink {
			return &symlinkEnd{path: sandboxPath(rel), entry: next}
		}
		cur = *next
	}
	return broken
}

// resolveOutside is where a workspace symlink's target p ends when the
// workspace's operations cannot follow it (out of the workspace, or
// through a symlinked directory), as the agent resolves it inside the
// sandbox: nil when
// it does not resolve there; the path alone, no entry, when the agent
// cannot be asked.
func (fs *filesystemService) resolveOutside(ctx context.Context, p string) *symlinkEnd {
	a, err := fs.s.agent(ctx)
	if err != nil {
		return &symlinkEnd{path: p}
	}
	e, err := a.Stat(ctx, p)
	var fe *procs.FileError
	switch {
	case errors.As(err, &fe):
		return nil
	case err != nil:
		return &symlinkEnd{path: p}
	case e.IsSymlink() && e.Target == "":
		return nil
	case e.IsSymlink():
		return &symlinkEnd{path: e.Target, entry: &agentapi.WorkspaceFile{Mode: e.TargetMode, Dir: e.TargetMode&unix.S_IFMT == unix.S_IFDIR}}
	}
	return &symlinkEnd{path: p, entry: &agentapi.WorkspaceFile{Mode: e.Mode, Dir: e.IsDir()}}
}

// info describes one workspace entry, a symlink with where it leads.
func (fs *filesystemService) info(ctx context.Context, f agentapi.WorkspaceFile) *filesystem.EntryInfo {
	if !f.Symlink {
		return entryInfo(f, nil)
	}
	return entryInfo(f, fs.resolve(ctx, f))
}

func (fs *filesystemService) stat(ctx context.Context, rel string) (*filesystem.EntryInfo, error) {
	f, err := fs.s.core.StatFile(ctx, fs.s.id(ctx), rel)
	if err != nil {
		return nil, err
	}
	e := fs.info(ctx, *f)
	fs.withMeta(ctx, e)
	return e, nil
}

// anyStat describes a path through the agent.
func (fs *filesystemService) anyStat(ctx context.Context, abs string) (*filesystem.EntryInfo, error) {
	var e *procs.FileEntry
	err := fs.s.inSandbox(ctx, func(a *procs.Agent) (err error) {
		e, err = a.Stat(ctx, abs)
		return err
	})
	if err != nil {
		return nil, err
	}
	return agentEntryInfo(*e), nil
}

// statTarget describes t, wherever it is.
func (fs *filesystemService) statTarget(ctx context.Context, t target) (*filesystem.EntryInfo, error) {
	if t.ws {
		e, err := fs.stat(ctx, t.rel)
		if !retryInSandbox(err) {
			return e, err
		}
	}
	return fs.anyStat(ctx, t.abs)
}

func (fs *filesystemService) Stat(ctx context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	t, err := sandboxTarget("path", req.Msg.GetPath())
	if err != nil {
		return nil, connectError(err)
	}
	e, err := fs.statTarget(ctx, t)
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&filesystem.StatResponse{Entry: e}), nil
}

func (fs *filesystemService) MakeDir(ctx context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	t, err := sandboxTarget("path", req.Msg.GetPath())
	if err == nil {
		err = checkWrite(t, rootUser(req.Header(), ""))
	}
	if err != nil {
		return nil, connectError(err)
	}
	var created bool
	if t.ws {
		created, err = fs.s.core.MakeDir(ctx, fs.s.id(ctx), t.rel)
	}
	if !t.ws || retryInSandbox(err) {
		err = fs.s.inSandbox(ctx, func(a *procs.Agent) (err error) {
			created, err = a.MakeDir(ctx, t.abs)
			return err
		})
	}
	if err != nil {
		return nil, connectError(err)
	}
	if !created {
		return nil, connect.NewError(connect.CodeAlreadyExists, errors.New("directory "+t.abs+" already exists"))
	}
	e, err := fs.statTarget(ctx, t)
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&filesystem.MakeDirResponse{Entry: e}), nil
}

func (fs *filesystemService) Move(ctx context.Context, req *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
	from, err := sandboxTarget("source", req.Msg.GetSource())
	if err != nil {
		return nil, connectError(err)
	}
	to, err := sandboxTarget("destination", req.Msg.GetDestination())
	if err != nil {
		return nil, connectError(err)
	}
	root := rootUser(req.Header(), "")
	if err := errors.Join(checkWrite(from, root), checkWrite(to, root)); err != nil {
		return nil, connectError(err)
	}
	if (from.ws && from.rel == "") || (to.ws && to.rel == "") {
		return nil, connectError(errdefs.Field("source", "the home directory itself cannot be moved or replaced"))
	}
	both := from.ws && to.ws
	if both {
		err = fs.s.core.MoveFile(ctx, fs.s.id(ctx), from.rel, to.rel)
	}
	if !both || retryInSandbox(err) { // the agent sees the workspace too; across mounts is EXDEV
		err = fs.s.inSandbox(ctx, func(a *procs.Agent) error { return a.Rename(ctx, from.abs, to.abs) })
	}
	if err != nil {
		return nil, connectError(err)
	}
	e, err := fs.statTarget(ctx, to)
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&filesystem.MoveResponse{Entry: e}), nil
}

func (fs *filesystemService) ListDir(ctx context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	t, err := sandboxTarget("path", req.Msg.GetPath())
	if err != nil {
		return nil, connectError(err)
	}
	depth := int(req.Msg.GetDepth())
	if depth <= 0 {
		depth = 1
	}
	out := &filesystem.ListDirResponse{}
	if t.ws {
		files, err := fs.s.core.ListDir(ctx, fs.s.id(ctx), t.rel, depth)
		if err == nil {
			out.Entries = make([]*filesystem.EntryInfo, 0, len(files))
			for _, f := range files {
				out.Entries = append(out.Entries, fs.info(ctx, f))
			}
			fs.withMeta(ctx, out.Entries...)
			return connect.NewResponse(out), nil
		}
		if !retryInSandbox(err) {
			return nil, connectError(err)
		}
	}
	var entries []procs.FileEntry
	err = fs.s.inSandbox(ctx, func(a *procs.Agent) (err error) {
		entries, err = a.ListDir(ctx, t.abs, depth)
		return err
	})
	if err != nil {
		return nil, connectError(err)
	}
	out.Entries = make([]*filesystem.EntryInfo, 0, len(entries))
	for _, e := range entries {
		out.Entries = append(out.Entries, agentEntryInfo(e))
	}
	return connect.NewResponse(out), nil
}

func (fs *filesystemService) Remove(ctx context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	t, err := sandboxTarget("path", req.Msg.GetPath())
	if err == nil {
		err = checkWrite(t, rootUser(req.Header(), ""))
	}
	if err != nil {
		return nil, connectError(err)
	}
	if t.ws && t.rel == "" {
		return nil, connectError(errdefs.Field("path", "the home directory itself cannot be removed"))
	}
	if t.ws {
		err = fs.s.core.RemoveAll(ctx, fs.s.id(ctx), t.rel)
	}
	if !t.ws || retryInSandbox(err) {
		err = fs.s.inSandbox(ctx, func(a *procs.Agent) error { return a.RemoveAll(ctx, t.abs) })
	}
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&filesystem.RemoveResponse{}), nil
}
