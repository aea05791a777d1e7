package sessions

import (
	"context"
	"io"
	"os"
	"path"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/wire"
)

// File operations beyond /v1's (the E2B endpoint's filesystem): paths are
// relative to the workspace ("" is its root), resolved beneath it with
// nothing followed, as every session file operation is.

// validDir checks a path that may be the workspace's root ("").
func validDir(path string) error {
	if path == "" {
		return nil
	}
	if err := container.ValidPath(path); err != nil {
		return errdefs.Field("path", "%v", err)
	}
	return nil
}

// StatFile describes one entry of a session's workspace ("" its root); a
// symlink is described itself.
func (k *Keeper) StatFile(ctx context.Context, id, path string) (*agentapi.WorkspaceFile, error) {
	if err := validDir(path); err != nil {
		return nil, err
	}
	sess, err := k.session(ctx, id)
	if err != nil {
		return nil, err
	}
	e, err := sess.Stat(ctx, path)
	if err != nil {
		return nil, k.core.Classify(err)
	}
	wf := wire.Entry(e)
	return &wf, nil
}

// ListDir lists a directory of a session's workspace to depth levels
// (1: its entries), at most 10,000 entries.
func (k *Keeper) ListDir(ctx context.Context, id, dir string, depth int) ([]agentapi.WorkspaceFile, error) {
	if err := validDir(dir); err != nil {
		return nil, err
	}
	sess, err := k.session(ctx, id)
	if err != nil {
		return nil, err
	}
	entries, _, err := sess.ListDir(ctx, dir, depth)
	if err != nil {
		return nil, k.core.Classify(err)
	}
	out := make([]agentapi.WorkspaceFile, 0, len(entries))
	for _, e := range entries {
		out = append(out, wire.Entry(e))
	}
	return out, nil
}

// MakeDir makes a directory and its parents; created is false when it
// was there already.
func (k *Keeper) MakeDir(ctx context.Context, id, path string) (created bool, err error) {
	sess, err := k.sessionFile(ctx, id, path)
	if err != nil {
		return false, err
	}
	created, err = sess.MakeDir(ctx, path)
	return created, k.core.Classify(err)
}

// MoveFile renames an entry of a session's workspace, replacing what is
// at to; to's parent directories are made.
func (k *Keeper) MoveFile(ctx context.Context, id, from, to string) error {
	sess, err := k.sessionFile(ctx, id, from)
	if err != nil {
		return err
	}
	if err := container.ValidPath(to); err != nil {
		return errdefs.Field("destination", "%v", err)
	}
	if dir := path.Dir(to); dir != "." {
		if _, err := sess.MakeDir(ctx, dir); err != nil {
			return k.core.Classify(err)
		}
	}
	return k.core.Classify(sess.Rename(ctx, from, to))
}

// RemoveAll removes an entry of a session's workspace and everything
// under it (a symlink is removed, never followed); a missing one is no
// error.
func (k *Keeper) RemoveAll(ctx context.Context, id, path string) error {
	sess, err := k.sessionFile(ctx, id, path)
	if err != nil {
		return err
	}
	return k.core.Classify(sess.RemoveAll(ctx, path))
}

// WriteFrom streams r into a file of a session's workspace (parents
// made), so that a large upload is never held in memory whole.
func (k *Keeper) WriteFrom(ctx context.Context, id, path string, r io.Reader) (int64, error) {
	sess, err := k.sessionFile(ctx, id, path)
	if err != nil {
		return 0, err
	}
	n, err := sess.WriteFrom(ctx, path, r, 0o644)
	return n, k.core.Classify(err)
}

// OpenFile opens a regular file of a session's workspace for reading.
func (k *Keeper) OpenFile(ctx context.Context, id, path string) (*os.File, error) {
	sess, err := k.sessionFile(ctx, id, path)
	if err != nil {
		return nil, err
	}
	f, err := sess.Open(ctx, path)
	return f, k.core.Classify(err)
}
