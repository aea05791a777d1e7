package envd

import (
	"context"
	"errors"
	"os"
	"path"

	"connectrpc.com/connect"
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

// entryInfo converts a workspace entry.
func entryInfo(f agentapi.WorkspaceFile) *filesystem.EntryInfo {
	typ, mode := filesystem.FileType_FILE_TYPE_FILE, os.FileMode(f.Mode&0o777)
	switch {
	case f.Dir:
		typ, mode = filesystem.FileType_FILE_TYPE_DIRECTORY, mode|os.ModeDir
	case f.Symlink:
		typ, mode = filesystem.FileType_FILE_TYPE_SYMLINK, mode|os.ModeSymlink
	}
	return &filesystem.EntryInfo{
		Name: path.Base(sandboxPath(f.Path)), Type: typ, Path: sandboxPath(f.Path), Size: f.Size,
		Mode: uint32(mode), Permissions: mode.String(), Owner: "user", Group: "user",
		ModifiedTime: timestamppb.New(f.ModTime),
	}
}

func (fs *filesystemService) stat(ctx context.Context, rel string) (*filesystem.EntryInfo, error) {
	f, err := fs.s.core.StatFile(ctx, fs.s.id(ctx), rel)
	if err != nil {
		return nil, err
	}
	return entryInfo(*f), nil
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
		out.Entries = append(out.Entries, entryInfo(f))
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
