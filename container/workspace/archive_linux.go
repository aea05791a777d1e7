package workspace

import (
	"archive/tar"
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

// WriteTar writes the whole workspace to tw (a parked session's archive, a
// fork's copy): directories, regular files and symlinks with their modes
// and mtimes, and the metadata of files and directories (meta_linux.go).
// It walks directory fds, each element opened beneath its parent with
// nothing followed: a symlink is archived as a symlink, its target as
// written, never read through. FIFOs, sockets and devices are
// skipped. A file that shrinks while it is read is padded with zeros (a
// background process may write meanwhile; the caller holds the session).
func (w *Workspace) WriteTar(tw *tar.Writer) error {
	if err := w.hold(); err != nil {
		return err
	}
	defer w.mu.RUnlock()
	var fs unix.Statfs_t
	if err := unix.Fstatfs(w.fd, &fs); err != nil {
		return fmt.Errorf("archive: statfs: %w", err)
	}
	root, err := w.openDir("")
	if err != nil {
		return mapErr("archive", "/", err)
	}
	budget := int64(fs.Blocks) * fs.Bsize
	return writeDir(tw, root, "", &budget)
}

// writeDir archives the contents of the directory dfd (which it closes),
// whose workspace path is dir. budget is what the files may still add up
// to: the workspace's size. Past it (sparse files, hard links, whose data
// would be written in full) the archive fails with ErrTooLarge, before it
// writes more than a workspace holds.
func writeDir(tw *tar.Writer, dfd int, dir string, budget *int64) error {
	d := os.NewFile(uintptr(dfd), dir)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("archive %s/: %w", dir, err)
	}
	sort.Strings(names)
	for _, name := range names {
		p := path.Join(dir, name)
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) { // removed meanwhile
				continue
			}
			return mapErr("archive", p, err)
		}
		hdr := &tar.Header{Name: p, Mode: int64(st.Mode & 0o7777), ModTime: time.Unix(st.Mtim.Unix()), Format: tar.FormatPAX}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			hdr.Typeflag, hdr.Name = tar.TypeDir, p+"/"
			sub, err := unix.Openat2(dfd, name, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: beneath})
			if err != nil {
				return mapErr("archive", p, err)
			}
			if hdr.PAXRecords, err = readMeta(sub); err != nil {
				unix.Close(sub)
				return mapErr("archive", p, err)
			}
			if err := tw.WriteHeader(hdr); err != nil {
				unix.Close(sub)
				return err
			}
			if err := writeDir(tw, sub, p, budget); err != nil {
				return err
			}
		case unix.S_IFLNK:
			buf := make([]byte, MaxPathBytes)
			n, err := unix.Readlinkat(dfd, name, buf)
			if err != nil {
				return mapErr("archive", p, err)
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, string(buf[:n])
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		case unix.S_IFREG:
			if err := writeFile(tw, dfd, name, hdr, budget); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeFile(tw *tar.Writer, dfd int, name string, hdr *tar.Header, budget *int64) error {
	fd, err := unix.Openat2(dfd, name, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: beneath})
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return mapErr("archive", hdr.Name, err)
	}
	f := os.NewFile(uintptr(fd), hdr.Name)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("archive %s: %w", hdr.Name, err)
	}
	if !st.Mode().IsRegular() { // swapped meanwhile
		return nil
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size()
	if hdr.PAXRecords, err = readMeta(fd); err != nil {
		return mapErr("archive", hdr.Name, err)
	}
	if *budget -= hdr.Size; *budget < 0 {
		return fmt.Errorf("archive %s: %w: the workspace's files add up to more than its size (a sparse file, or hard links): delete or shrink them first", hdr.Name, ErrTooLarge)
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.CopyN(tw, f, hdr.Size)
	if errors.Is(err, io.EOF) {
		_, err = io.CopyN(tw, zeros{}, hdr.Size-n)
	}
	if err != nil {
		return fmt.Errorf("archive %s: %w", hdr.Name, err)
	}
	return nil
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// ReadTar extracts an archive written by WriteTar into the workspace
// (empty, as a new sandbox's is): directories, regular files and symlinks,
// with their modes, owned by the sandbox user, and the metadata of files
// and directories: only user.e2b.*, bounded (meta_linux.go); a filesystem
// without user xattrs restores them without it (MetaLost counts them).
// Every path is checked as a caller's is (ValidPath) and reached with
// nothing followed; a symlink is created as a symlink, never written
// through. Other entry types are
// refused. The workspace's size bounds it (ErrFull).
func (w *Workspace) ReadTar(tr *tar.Reader) error {
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("extract: %w", err)
		}
		p := strings.TrimSuffix(hdr.Name, "/")
		if err := checkPath(p); err != nil {
			return fmt.Errorf("extract %q: %w", hdr.Name, err)
		}
		mode := uint32(hdr.Mode) & 0o7777
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = w.extractDir(p, mode, hdr.PAXRecords)
		case tar.TypeReg:
			err = w.extractFile(p, tr, mode, hdr.ModTime, hdr.PAXRecords)
		case tar.TypeSymlink:
			err = w.symlink(p, hdr.Linkname)
		default:
			err = fmt.Errorf("extract %s: %w: tar entry type %q", p, ErrNotRegular, hdr.Typeflag)
		}
		if err != nil {
			return err
		}
	}
}

func (w *Workspace) extractDir(p string, mode uint32, recs map[string]string) error {
	if err := w.hold(); err != nil {
		return err
	}
	defer w.mu.RUnlock()
	fd, _, err := w.mkdirAll(p)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Fchmod(fd, mode); err != nil {
		return fmt.Errorf("chmod %s: %w", p, err)
	}
	return w.restoreMeta(fd, p, recs)
}

// restoreMeta sets an entry's metadata on fd, counting it lost where the
// filesystem keeps no user xattrs.
func (w *Workspace) restoreMeta(fd int, p string, recs map[string]string) error {
	lost, err := applyMeta(fd, p, recs)
	if lost {
		w.metaLost.Add(1)
	}
	return err
}

func (w *Workspace) extractFile(p string, r io.Reader, mode uint32, mtime time.Time, recs map[string]string) error {
	f, err := w.create(p, mode)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("create %s: %w (%v)", p, ErrNotRegular, err)
	}
	if err := f.Chown(w.uid, w.gid); err != nil {
		return fmt.Errorf("chown %s: %w", p, err)
	}
	if err := f.Chmod(os.FileMode(mode&0o777) | unixModeBits(mode)); err != nil {
		return fmt.Errorf("chmod %s: %w", p, err)
	}
	if _, err := io.Copy(f, r); err != nil {
		if errors.Is(err, unix.ENOSPC) {
			return fmt.Errorf("write %s: %w", p, ErrFull)
		}
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := w.restoreMeta(int(f.Fd()), p, recs); err != nil {
		return err
	}
	if !mtime.IsZero() {
		ts := unix.NsecToTimespec(mtime.UnixNano())
		_ = unix.UtimesNanoAt(int(f.Fd()), "", []unix.Timespec{ts, ts}, unix.AT_EMPTY_PATH)
	}
	return nil
}

// unixModeBits carries setgid and sticky bits over (setuid never: a
// sandbox file must not become a setuid binary on the host's view).
func unixModeBits(mode uint32) os.FileMode {
	var m os.FileMode
	if mode&unix.S_ISGID != 0 {
		m |= os.ModeSetgid
	}
	if mode&unix.S_ISVTX != 0 {
		m |= os.ModeSticky
	}
	return m
}

// symlink creates the symlink p pointing at target (as written, never
// resolved), owned by the sandbox user.
func (w *Workspace) symlink(p, target string) error {
	if target == "" || len(target) > MaxPathBytes || strings.IndexByte(target, 0) >= 0 {
		return fmt.Errorf("symlink %s: %w: bad target", p, ErrInvalidPath)
	}
	if err := w.hold(); err != nil {
		return err
	}
	defer w.mu.RUnlock()
	dfd, _, err := w.mkdirAll(path.Dir(p))
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	name := path.Base(p)
	if err := unix.Symlinkat(target, dfd, name); err != nil {
		return mapErr("symlink", p, err)
	}
	if err := unix.Fchownat(dfd, name, w.uid, w.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("chown %s: %w", p, err)
	}
	return nil
}

// CopyTo copies the whole workspace into dst (a fork's), as WriteTar and
// ReadTar do, streamed: nothing is held in memory nor written to disk.
func (w *Workspace) CopyTo(dst *Workspace) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		tw := tar.NewWriter(pw)
		err := w.WriteTar(tw)
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
		done <- err
	}()
	err := dst.ReadTar(tar.NewReader(pr))
	pr.CloseWithError(errors.New("the copy stopped"))
	if werr := <-done; err == nil && werr != nil && !errors.Is(werr, io.ErrClosedPipe) {
		err = werr
	}
	return err
}
