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
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// filesystemService is envd's filesystem.Filesystem over the session's
// workspace: every path goes through the core's beneath-the-workspace,
// no-symlink-following file operations.
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
// operations one link at a time. A link that does not resolve (missing,
// a loop, through a symlinked directory, which those operations refuse)
// reads as envd's: its own path, no entry. One that leads out of the
// workspace, which the host cannot follow safely, keeps the path it
// names and no entry (envd would stat the rootfs there).
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
			return &symlinkEnd{path: target}
		}
		next, err := fs.s.core.StatFile(ctx, fs.s.id(ctx), rel)
		if err != nil {
			return broken
		}
		if !next.Symlink {
			return &symlinkEnd{path: sandboxPath(rel), entry: next}
		}
		cur = *next
	}
	return broken
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
	return fs.info(ctx, *f), nil
}

func (fs *filesystemService) Stat(ctx context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	rel, err := workspacePath("path", req.Msg.GetPath())
	if err != nil {
		return nil, connectError(err)
	}
	e, err := fs.stat(ctx, rel)
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&filesystem.StatResponse{Entry: e}), nil
}

func (fs *filesystemService) MakeDir(ctx context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	rel, err := workspacePath("path", req.Msg.GetPath())
	if err != nil {
		return nil, connectError(err)
	}
	created, err := fs.s.core.MakeDir(ctx, fs.s.id(ctx), rel)
	if err != nil {
		return nil, connectError(err)
	}
	if !created {
		return nil, connect.NewError(connect.CodeAlreadyExists, errors.New("directory "+sandboxPath(rel)+" already exists"))
	}
	e, err := fs.stat(ctx, rel)
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&filesystem.MakeDirResponse{Entry: e}), nil
}

func (fs *filesystemService) Move(ctx context.Context, req *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
	from, err := workspacePath("source", req.Msg.GetSource())
	if err != nil {
		return nil, connectError(err)
	}
	to, err := workspacePath("destination", req.Msg.GetDestination())
	if err != nil {
		return nil, connectError(err)
	}
	if from == "" || to == "" {
		return nil, connectError(errdefs.Field("source", "the home directory itself cannot be moved or replaced"))
	}
	if err := fs.s.core.MoveFile(ctx, fs.s.id(ctx), from, to); err != nil {
		return nil, connectError(err)
	}
	e, err := fs.stat(ctx, to)
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&filesystem.MoveResponse{Entry: e}), nil
}

func (fs *filesystemService) ListDir(ctx context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	rel, err := workspacePath("path", req.Msg.GetPath())
	if err != nil {
		return nil, connectError(err)
	}
	depth := int(req.Msg.GetDepth())
	if depth <= 0 {
		depth = 1
	}
	files, err := fs.s.core.ListDir(ctx, fs.s.id(ctx), rel, depth)
	if err != nil {
		return nil, connectError(err)
	}
	out := &filesystem.ListDirResponse{Entries: make([]*filesystem.EntryInfo, 0, len(files))}
	for _, f := range files {
		out.Entries = append(out.Entries, fs.info(ctx, f))
	}
	return connect.NewResponse(out), nil
}

func (fs *filesystemService) Remove(ctx context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	rel, err := workspacePath("path", req.Msg.GetPath())
	if err != nil {
		return nil, connectError(err)
	}
	if rel == "" {
		return nil, connectError(errdefs.Field("path", "the home directory itself cannot be removed"))
	}
	if err := fs.s.core.RemoveAll(ctx, fs.s.id(ctx), rel); err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&filesystem.RemoveResponse{}), nil
}

func (fs *filesystemService) WatchDir(context.Context, *connect.Request[filesystem.WatchDirRequest], *connect.ServerStream[filesystem.WatchDirResponse]) error {
	return unimplemented("watching a directory")
}

func (fs *filesystemService) CreateWatcher(context.Context, *connect.Request[filesystem.CreateWatcherRequest]) (*connect.Response[filesystem.CreateWatcherResponse], error) {
	return nil, unimplemented("watching a directory")
}
