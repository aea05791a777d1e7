package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/workspace"
)

// File operations do not take the session (s.sem) as an exec does: a cell
// may run for minutes, and the workspace is safe to touch from the host
// meanwhile. Every access is beneath the mount's fd with nothing followed
// (package workspace), whatever the cell does to its files at the same
// time, and the workspace makes its own teardown wait for a running
// operation. So an operation only checks the session is not dead and
// counts as use for the idle timer, at its start and at its end. A paused
// session is neither waited for nor thawed: freezing stops its processes,
// not its tmpfs, which the host reads and writes as usual.

// files admits one file operation; done marks its end.
func (s *Session) files(ctx context.Context) (ws *container.Workspace, done func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == StateDead {
		return nil, nil, fmt.Errorf("session %s: %w: %s", s.id, ErrDead, s.deadWhy)
	}
	s.lastUsed = s.m.clock.Now()
	done = func() {
		s.mu.Lock()
		s.lastUsed = s.m.clock.Now()
		s.mu.Unlock()
	}
	return s.r.Sandbox().Workspace(), done, nil
}

// fileErr says ErrDead for a workspace that went with its sandbox while
// the operation ran.
func (s *Session) fileErr(err error) error {
	if errors.Is(err, workspace.ErrClosed) {
		return fmt.Errorf("session %s: %w: %w", s.id, ErrDead, err)
	}
	return err
}

// WriteFile writes a file into the session's /workspace (parents created).
// Symlinks are never followed.
func (s *Session) WriteFile(ctx context.Context, p string, data []byte, mode uint32) error {
	ws, done, err := s.files(ctx)
	if err != nil {
		return err
	}
	defer done()
	return s.fileErr(ws.WriteFile(p, data, mode))
}

// WriteFrom writes what r yields into the file p of /workspace (parents
// created) without holding it in memory, and returns the bytes written
// (workspace.Workspace.WriteFrom).
func (s *Session) WriteFrom(ctx context.Context, p string, r io.Reader, mode uint32) (int64, error) {
	ws, done, err := s.files(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	n, err := ws.WriteFrom(p, r, mode)
	return n, s.fileErr(err)
}

// ReadFile reads a regular file of at most limit bytes from /workspace.
func (s *Session) ReadFile(ctx context.Context, p string, limit int64) ([]byte, error) {
	ws, done, err := s.files(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	data, err := ws.ReadFile(p, limit)
	return data, s.fileErr(err)
}

// Open opens a regular file of /workspace for reading (a large download
// streams from it); the caller closes it.
func (s *Session) Open(ctx context.Context, p string) (*os.File, error) {
	ws, done, err := s.files(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	f, err := ws.Open(p)
	return f, s.fileErr(err)
}

// Remove removes a file or empty directory from /workspace.
func (s *Session) Remove(ctx context.Context, p string) error {
	ws, done, err := s.files(ctx)
	if err != nil {
		return err
	}
	defer done()
	return s.fileErr(ws.Remove(p))
}

// RemoveAll removes p and everything under it; symlinks are removed
// themselves, never followed. A p that does not exist is no error.
func (s *Session) RemoveAll(ctx context.Context, p string) error {
	ws, done, err := s.files(ctx)
	if err != nil {
		return err
	}
	defer done()
	return s.fileErr(ws.RemoveAll(p))
}

// Stat describes p ("" is /workspace itself) without following it.
func (s *Session) Stat(ctx context.Context, p string) (container.Entry, error) {
	ws, done, err := s.files(ctx)
	if err != nil {
		return container.Entry{}, err
	}
	defer done()
	e, err := ws.Stat(p)
	return e, s.fileErr(err)
}

// ListDir lists dir ("" is /workspace) down to depth levels (1: its
// children); truncated says the list stops at workspace.MaxListed entries.
func (s *Session) ListDir(ctx context.Context, dir string, depth int) (_ []container.Entry, truncated bool, _ error) {
	ws, done, err := s.files(ctx)
	if err != nil {
		return nil, false, err
	}
	defer done()
	es, truncated, err := ws.ListDir(dir, depth)
	return es, truncated, s.fileErr(err)
}

// MakeDir creates the directory p and its parents; created is false when
// it was a directory already (container.ErrExist when it is a file).
func (s *Session) MakeDir(ctx context.Context, p string) (created bool, err error) {
	ws, done, err := s.files(ctx)
	if err != nil {
		return false, err
	}
	defer done()
	created, err = ws.MakeDir(p)
	return created, s.fileErr(err)
}

// Rename moves from to to within /workspace, replacing what is there as
// rename(2) does; the destination's directory must exist.
func (s *Session) Rename(ctx context.Context, from, to string) error {
	ws, done, err := s.files(ctx)
	if err != nil {
		return err
	}
	defer done()
	return s.fileErr(ws.Rename(from, to))
}

// List lists /workspace (or dir beneath it) and the sha256 of each regular
// file; truncated says the list stops at workspace.MaxListed entries.
func (s *Session) List(ctx context.Context, dir string) (_ []container.Entry, _ []container.FileInfo, truncated bool, _ error) {
	ws, done, err := s.files(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	defer done()
	entries, truncated, err := ws.List(dir)
	if err != nil {
		return nil, nil, false, s.fileErr(err)
	}
	// Changed against an empty snapshot hashes every regular file.
	files, _, err := ws.Changed(container.Snapshot{}, nil)
	if err != nil {
		return nil, nil, false, s.fileErr(err)
	}
	return entries, files, truncated, nil
}
