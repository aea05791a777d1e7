package workspace

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"time"

	"golang.org/x/sys/unix"
)

// Entry describes one file in the workspace.
type Entry struct {
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	Mode    uint32    `json:"mode"`
	ModTime time.Time `json:"mtime"`
	Dir     bool      `json:"dir,omitempty"`
	Symlink bool      `json:"symlink,omitempty"`
	// Target is a symlink's target as written, never followed (Stat and
	// ListDir fill it; List does not).
	Target string `json:"target,omitempty"`
	ino    uint64
}

// mapErr turns resolution failures into the package's sentinels. A symlink
// or a ".." anywhere on the way fails resolution (ELOOP/EXDEV).
func mapErr(op, p string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%s %s: %w", op, p, ErrNotExist)
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%s %s: %w: a symlink on the path is not followed", op, p, ErrInvalidPath)
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%s %s: %w: a component is not a directory (symlinks are not followed)", op, p, ErrInvalidPath)
	case errors.Is(err, unix.EISDIR):
		return fmt.Errorf("%s %s: %w: is a directory", op, p, ErrNotRegular)
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return fmt.Errorf("%s %s: %w", op, p, ErrFull)
	}
	return fmt.Errorf("%s %s: %w", op, p, err)
}

// ReadFile returns a regular file's content, refusing files larger than
// limit bytes (ErrTooLarge), symlinks, and special files.
func (w *Workspace) ReadFile(p string, limit int64) ([]byte, error) {
	if err := ValidPath(p); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPath, err)
	}
	if err := w.hold(); err != nil {
		return nil, err
	}
	defer w.mu.RUnlock()
	fd, err := w.openat(p, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, mapErr("read", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: %w", p, ErrNotRegular)
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("read %s: %w: %d bytes, limit %d", p, ErrTooLarge, st.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("read %s: %w: grew past %d bytes", p, ErrTooLarge, limit)
	}
	return data, nil
}

// Remove deletes a file or an empty directory.
func (w *Workspace) Remove(p string) error {
	if err := ValidPath(p); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidPath, err)
	}
	if err := w.hold(); err != nil {
		return err
	}
	defer w.mu.RUnlock()
	dir, name := path.Split(p)
	dfd := w.fd
	if dir != "" {
		fd, err := w.openat(path.Clean(dir), unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return mapErr("remove", p, err)
		}
		defer unix.Close(fd)
		dfd = fd
	}
	err := unix.Unlinkat(dfd, name, 0)
	if errors.Is(err, unix.EISDIR) {
		err = unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR)
	}
	if err != nil {
		return mapErr("remove", p, err)
	}
	return nil
}

// List returns every entry under dir ("" or "." for the whole workspace),
// depth first, sorted by path, at most MaxListed; truncated says there
// were more. Symlinks are listed, never followed.
func (w *Workspace) List(dir string) (_ []Entry, truncated bool, _ error) {
	if err := w.hold(); err != nil {
		return nil, false, err
	}
	defer w.mu.RUnlock()
	return w.list(dir)
}

func (w *Workspace) list(dir string) (_ []Entry, truncated bool, _ error) {
	if dir == "" {
		dir = "."
	} else if err := ValidPath(dir); err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrInvalidPath, err)
	}
	var out []Entry
	var walk func(d string) error
	walk = func(d string) error {
		fd, err := w.openat(d, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return mapErr("list", d, err)
		}
		f := os.NewFile(uintptr(fd), d)
		names, err := f.Readdirnames(-1)
		if err != nil {
			f.Close()
			return err
		}
		sort.Strings(names)
		for _, n := range names {
			if len(out) >= MaxListed {
				truncated = true
				break
			}
			var st unix.Stat_t
			if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue // removed meanwhile
			}
			p := path.Join(d, n)
			e := entryOf(p, &st)
			out = append(out, e)
			if e.Dir {
				if err := walk(p); err != nil {
					f.Close()
					return err
				}
			}
		}
		f.Close()
		return nil
	}
	if err := walk(dir); err != nil {
		return nil, false, err
	}
	return out, truncated, nil
}

// Snapshot records the workspace's regular files (size, mtime, inode) so
// that Changed can tell what a later step created or modified.
type Snapshot map[string]Entry

// Snapshot takes a Snapshot of the whole workspace (of its first MaxListed
// entries).
func (w *Workspace) Snapshot() (Snapshot, error) {
	entries, _, err := w.List("")
	return snapshotOf(entries), err
}

func snapshotOf(entries []Entry) Snapshot {
	s := make(Snapshot, len(entries))
	for _, e := range entries {
		if !e.Dir && !e.Symlink {
			s[e.Path] = e
		}
	}
	return s
}

// Changed lists regular files that are new or differ (size, mtime or inode)
// from before, with sha256, inlining those matching patterns up to
// MaxInlineBytes in all. Truncated says the workspace had more than
// MaxListed entries, so changed files may be missing.
func (w *Workspace) Changed(before Snapshot, patterns []string) (_ []FileInfo, truncated bool, _ error) {
	if err := w.hold(); err != nil {
		return nil, false, err
	}
	defer w.mu.RUnlock()
	entries, truncated, err := w.list("")
	if err != nil {
		return nil, false, err
	}
	now := snapshotOf(entries)
	var out []FileInfo
	inline := int64(0)
	for _, p := range sortedKeys(now) {
		e := now[p]
		if b, ok := before[p]; ok && b.Size == e.Size && b.ModTime.Equal(e.ModTime) && b.ino == e.ino {
			continue
		}
		fi, data, err := w.hashFile(p, wantInline(p, patterns), MaxInlineBytes-inline)
		if err != nil {
			continue // changed under us: a session's process may still run
		}
		inline += int64(len(data))
		fi.Content = data
		out = append(out, fi)
	}
	return out, truncated, nil
}

func sortedKeys(s Snapshot) []string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
