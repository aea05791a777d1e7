package session

import (
	"context"

	"github.com/nsbox/nsbox/container"
)

// WriteFile writes a file into the session's /workspace (parents created).
// Symlinks are never followed.
func (s *Session) WriteFile(ctx context.Context, p string, data []byte, mode uint32) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	return s.r.Sandbox().Workspace().WriteFile(p, data, mode)
}

// ReadFile reads a regular file of at most limit bytes from /workspace.
func (s *Session) ReadFile(ctx context.Context, p string, limit int64) ([]byte, error) {
	if err := s.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.release()
	return s.r.Sandbox().Workspace().ReadFile(p, limit)
}

// Remove removes a file or empty directory from /workspace.
func (s *Session) Remove(ctx context.Context, p string) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	return s.r.Sandbox().Workspace().Remove(p)
}

// List lists /workspace (or dir beneath it) and the sha256 of each regular
// file; truncated says the list stops at workspace.MaxListed entries.
func (s *Session) List(ctx context.Context, dir string) (_ []container.Entry, _ []container.FileInfo, truncated bool, _ error) {
	if err := s.acquire(ctx); err != nil {
		return nil, nil, false, err
	}
	defer s.release()
	ws := s.r.Sandbox().Workspace()
	entries, truncated, err := ws.List(dir)
	if err != nil {
		return nil, nil, false, err
	}
	// Changed against an empty snapshot hashes every regular file.
	files, _, err := ws.Changed(container.Snapshot{}, nil)
	if err != nil {
		return nil, nil, false, err
	}
	return entries, files, truncated, nil
}
