package workspace

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Every operation here reaches its file in the same two steps: the parent
// directory is opened beneath the mount (openat2 with RESOLVE_BENEATH,
// NO_SYMLINKS and NO_XDEV, so a symlink or a ".." anywhere on the way is
// refused), and the last element is then acted on by name relative to that
// fd (fstatat, mkdirat, renameat2, unlinkat with no symlink followed). A
// single element has nothing left to resolve, so what the sandbox does to
// its workspace meanwhile (swap a directory for a symlink to /) can make an
// operation fail, never reach outside.

// openDir opens the directory dir ("" is the root) beneath the mount.
func (w *Workspace) openDir(dir string) (int, error) {
	if dir == "" {
		dir = "."
	}
	return w.openat(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
}

// parent opens the parent directory of the valid path p and returns its fd
// (the caller closes it) and p's last element.
func (w *Workspace) parent(op, p string) (int, string, error) {
	dir, name := path.Split(p)
	fd, err := w.openDir(strings.TrimSuffix(dir, "/"))
	if err != nil {
		return -1, "", mapErr(op, p, err)
	}
	return fd, name, nil
}

func checkPath(p string) error {
	if err := ValidPath(p); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidPath, err)
	}
	return nil
}

// entryOf describes p from its lstat: a directory's size too, as the
// kernel gives it (envd's EntryInfo reports it; on the tmpfs, 20 bytes
// an entry).
func entryOf(p string, st *unix.Stat_t) Entry {
	return Entry{
		Path:    p,
		Size:    st.Size,
		Mode:    st.Mode & 0o7777,
		ModTime: time.Unix(st.Mtim.Unix()),
		Dir:     st.Mode&unix.S_IFMT == unix.S_IFDIR,
		Symlink: st.Mode&unix.S_IFMT == unix.S_IFLNK,
		ino:     st.Ino,
	}
}

// statAt describes the element name of the directory dfd, never following
// it; a symlink comes with its target.
func statAt(dfd int, name, p string) (Entry, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return Entry{}, mapErr("stat", p, err)
	}
	e := entryOf(p, &st)
	if e.Symlink {
		buf := make([]byte, MaxPathBytes)
		if n, err := unix.Readlinkat(dfd, name, buf); err == nil {
			e.Target = string(buf[:n])
		}
	}
	return e, nil
}

// isSymlinkAt says whether the element name of dfd is a symlink: an open
// with O_DIRECTORY|O_NOFOLLOW of one fails with ENOTDIR, as for a file.
func isSymlinkAt(dfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// Stat describes p ("" is the workspace's root, whose Path is "") without
// following it: a symlink is described itself, with its target.
func (w *Workspace) Stat(p string) (Entry, error) {
	if err := w.hold(); err != nil {
		return Entry{}, err
	}
	defer w.mu.RUnlock()
	return w.stat(p)
}

func (w *Workspace) stat(p string) (Entry, error) {
	if p == "" {
		var st unix.Stat_t
		if err := unix.Fstat(w.fd, &st); err != nil {
			return Entry{}, fmt.Errorf("stat the workspace root: %w", err)
		}
		return entryOf("", &st), nil
	}
	if err := checkPath(p); err != nil {
		return Entry{}, err
	}
	dfd, name, err := w.parent("stat", p)
	if err != nil {
		return Entry{}, err
	}
	defer unix.Close(dfd)
	return statAt(dfd, name, p)
}

// ListDir lists the directory dir ("" is the root) down to depth levels
// (1, or anything less: its direct children), depth first, each
// directory's names sorted, at most MaxListed entries (truncated says
// there were more). Each entry's Path is relative to the workspace.
// Symlinks are listed with their target and never followed, nor descended
// into. A dir that is a file gives ErrNotDir.
func (w *Workspace) ListDir(dir string, depth int) (_ []Entry, truncated bool, _ error) {
	if dir != "" {
		if err := checkPath(dir); err != nil {
			return nil, false, err
		}
	}
	depth = max(depth, 1)
	if err := w.hold(); err != nil {
		return nil, false, err
	}
	defer w.mu.RUnlock()
	fd, err := w.openDir(dir)
	if errors.Is(err, unix.ENOTDIR) {
		if e, serr := w.stat(dir); serr == nil && !e.Dir && !e.Symlink {
			return nil, false, fmt.Errorf("list %s: %w", dir, ErrNotDir)
		}
	}
	if err != nil {
		return nil, false, mapErr("list", dir, err)
	}
	var out []Entry
	var walk func(fd int, rel string, level int) error
	walk = func(fd int, rel string, level int) error {
		f := os.NewFile(uintptr(fd), rel)
		defer f.Close()
		names, err := f.Readdirnames(-1)
		if err != nil {
			return fmt.Errorf("list %s: %w", rel, err)
		}
		sort.Strings(names)
		for _, n := range names {
			if len(out) >= MaxListed {
				truncated = true
				return nil
			}
			p := path.Join(rel, n)
			e, err := statAt(fd, n, p)
			if err != nil {
				continue // removed meanwhile: the sandbox may be running
			}
			out = append(out, e)
			if !e.Dir || level >= depth {
				continue
			}
			cfd, err := unix.Openat2(fd, n, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: beneath})
			if err != nil {
				continue // replaced meanwhile (by a symlink, say): not followed
			}
			if err := walk(cfd, p, level+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(fd, dir, 1); err != nil {
		return nil, false, err
	}
	return out, truncated, nil
}

// MakeDir creates the directory p and its missing parents, owned by the
// sandbox user. created says p itself was made: false, with no error, when
// it is a directory already. An element that exists as anything but a
// directory gives ErrExist; as a symlink, ErrInvalidPath (not followed).
func (w *Workspace) MakeDir(p string) (created bool, err error) {
	if err := checkPath(p); err != nil {
		return false, err
	}
	if err := w.hold(); err != nil {
		return false, err
	}
	defer w.mu.RUnlock()
	fd, created, err := w.mkdirAll(p)
	if err != nil {
		return false, err
	}
	unix.Close(fd)
	return created, nil
}

// mkdirAll makes p ("" or "." is the root) and its parents one element at
// a time, each relative to its parent's fd, and returns p's fd (the caller
// closes it) and whether p itself was made.
func (w *Workspace) mkdirAll(p string) (fd int, created bool, err error) {
	cur, err := w.openDir("")
	if err != nil {
		return -1, false, mapErr("mkdir", "/", err)
	}
	done := ""
	for _, el := range splitPath(p) {
		done = path.Join(done, el)
		err := unix.Mkdirat(cur, el, 0o755)
		created = err == nil
		if err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(cur)
			return -1, false, mapErr("mkdir", done, err)
		}
		next, err := unix.Openat2(cur, el, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: beneath})
		if errors.Is(err, unix.ENOTDIR) && !isSymlinkAt(cur, el) {
			unix.Close(cur)
			return -1, false, fmt.Errorf("mkdir %s: %w: %s exists and is not a directory", p, ErrExist, done)
		}
		unix.Close(cur)
		if err != nil {
			return -1, false, mapErr("mkdir", done, err)
		}
		cur = next
		if created {
			if err := unix.Fchown(cur, w.uid, w.gid); err != nil {
				unix.Close(cur)
				return -1, false, fmt.Errorf("chown %s: %w", done, err)
			}
		}
	}
	return cur, created, nil
}

// Rename moves from to to, replacing what is there as rename(2) does (a
// file, or an empty directory when from is one). Neither parent may be
// reached through a symlink; a symlink at from is moved itself. The
// destination's directory must exist. A directory in the way gives
// ErrExist, and so does a file where from is a directory.
func (w *Workspace) Rename(from, to string) error {
	if err := checkPath(from); err != nil {
		return err
	}
	if err := checkPath(to); err != nil {
		return err
	}
	if err := w.hold(); err != nil {
		return err
	}
	defer w.mu.RUnlock()
	fdir, fname, err := w.parent("rename", from)
	if err != nil {
		return err
	}
	defer unix.Close(fdir)
	tdir, tname, err := w.parent("rename", to)
	if err != nil {
		return err
	}
	defer unix.Close(tdir)
	err = unix.Renameat2(fdir, fname, tdir, tname, 0)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.EEXIST):
		return fmt.Errorf("rename %s to %s: %w: %s is a directory that is not empty", from, to, ErrExist, to)
	case errors.Is(err, unix.EISDIR):
		return fmt.Errorf("rename %s to %s: %w: %s is a directory", from, to, ErrExist, to)
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("rename %s to %s: %w: %s is a directory and %s is not", from, to, ErrExist, from, to)
	case errors.Is(err, unix.EINVAL):
		return fmt.Errorf("rename %s to %s: %w: a directory cannot move beneath itself", from, to, ErrInvalidPath)
	}
	return mapErr("rename", from, err)
}

// RemoveAll removes p and, when it is a directory, everything under it. A
// symlink, at p or anywhere below, is removed itself, never followed. As
// with os.RemoveAll, a p that does not exist is no error; a p reached
// through a symlink is (ErrInvalidPath).
func (w *Workspace) RemoveAll(p string) error {
	if err := checkPath(p); err != nil {
		return err
	}
	if err := w.hold(); err != nil {
		return err
	}
	defer w.mu.RUnlock()
	dfd, name, err := w.parent("remove", p)
	if errors.Is(err, ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	return removeAt(dfd, name, p)
}

// removeTries bounds how often removeAt empties a directory that the
// sandbox keeps filling meanwhile.
const removeTries = 5

func removeAt(dfd int, name, p string) error {
	for try := 1; ; try++ {
		err := unix.Unlinkat(dfd, name, 0)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EISDIR) {
			return mapErr("remove", p, err)
		}
		if err := removeContents(dfd, name, p); err != nil {
			return err
		}
		err = unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR)
		switch {
		case err == nil, errors.Is(err, unix.ENOENT):
			return nil
		case (errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.ENOTDIR)) && try < removeTries:
			continue // written to (or replaced) while we emptied it
		}
		return mapErr("remove", p, err)
	}
}

func removeContents(dfd int, name, p string) error {
	fd, err := unix.Openat2(dfd, name, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: beneath})
	if err != nil {
		// Gone, or no longer a directory: the caller's unlink sees to it.
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return nil
		}
		return mapErr("remove", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	for {
		names, err := f.Readdirnames(1024)
		for _, n := range names {
			if err := removeAt(fd, n, path.Join(p, n)); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && len(names) == 0) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
}

// Open opens the regular file p for reading (a large download streams
// from it); the caller closes it. Symlinks and special files are refused.
func (w *Workspace) Open(p string) (*os.File, error) {
	if err := checkPath(p); err != nil {
		return nil, err
	}
	if err := w.hold(); err != nil {
		return nil, err
	}
	defer w.mu.RUnlock()
	fd, err := w.openat(p, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, mapErr("open", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", p, err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", p, ErrNotRegular)
	}
	return f, nil
}

// WriteFrom creates or replaces the file p with what r yields, as
// WriteFile does (parents created, all owned by the sandbox user, nothing
// followed), without holding the content in memory; it returns the bytes
// written. The workspace's size bounds it (ErrFull). When the copy fails
// (r's error, or the workspace full), the partial file is removed: an
// upload cut off mid-way leaves nothing behind (a file it replaced is
// gone too, truncated at the start).
func (w *Workspace) WriteFrom(p string, r io.Reader, perm uint32) (int64, error) {
	if err := checkPath(p); err != nil {
		return 0, err
	}
	if perm == 0 {
		perm = 0o644
	}
	f, err := w.create(p, perm)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return 0, fmt.Errorf("create %s: %w (%v)", p, ErrNotRegular, err)
	}
	if err := f.Chown(w.uid, w.gid); err != nil {
		return 0, fmt.Errorf("chown %s: %w", p, err)
	}
	n, err := io.Copy(f, r)
	if err != nil {
		w.removeIfSame(p, f)
		if errors.Is(err, unix.ENOSPC) {
			return n, fmt.Errorf("write %s: %w", p, ErrFull)
		}
		return n, fmt.Errorf("write %s: %w", p, err)
	}
	return n, nil
}

// removeIfSame removes p if it is still the file f (the sandbox may have
// replaced it meanwhile: that one is left alone).
func (w *Workspace) removeIfSame(p string, f *os.File) {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return
	}
	if e, err := w.Stat(p); err == nil && e.ino == st.Ino {
		_ = w.Remove(p)
	}
}

// create opens p for WriteFrom, its parents made. Only this holds the
// workspace: the copy into the open file may take as long as the caller's
// reader, and the file needs no more of the mount's fd.
func (w *Workspace) create(p string, perm uint32) (*os.File, error) {
	if err := w.hold(); err != nil {
		return nil, err
	}
	defer w.mu.RUnlock()
	dfd, _, err := w.mkdirAll(path.Dir(p))
	if err != nil {
		return nil, err
	}
	// O_NONBLOCK: a FIFO the sandbox put there fails (ENXIO) or is refused
	// below, instead of blocking the host until a reader comes.
	fd, err := unix.Openat2(dfd, path.Base(p), &unix.OpenHow{
		Flags:   unix.O_WRONLY | unix.O_CREAT | unix.O_TRUNC | unix.O_NONBLOCK | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Mode:    uint64(perm & 0o777),
		Resolve: beneath,
	})
	unix.Close(dfd)
	if errors.Is(err, unix.ENXIO) {
		return nil, fmt.Errorf("create %s: %w", p, ErrNotRegular)
	}
	if err != nil {
		return nil, mapErr("create", p, err)
	}
	return os.NewFile(uintptr(fd), p), nil
}
