package importer

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// extractor writes archive entries under rootFd without ever following a
// symlink: every parent is opened with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS
// and every final component is created with O_EXCL/O_NOFOLLOW semantics.
type extractor struct {
	rootFd int
	rep    *Report
	root   bool // running as root: keep owners
	// strict: an entry the rules would skip fails the import instead
	// (ErrRefused): an image's layers (Layers).
	strict bool
	// layers: a later entry replaces an earlier directory too, as a
	// later image layer does.
	layers bool
}

func (x *extractor) close() { unix.Close(x.rootFd) }

// reject records that the entry path is not imported, and why; in strict
// mode it returns ErrRefused, which ends the import.
func (x *extractor) reject(path, reason string) error {
	x.rep.Rejected = append(x.rep.Rejected, Rejection{Path: path, Reason: reason})
	if x.strict {
		return fmt.Errorf("%w: /%s: %s", ErrRefused, path, reason)
	}
	return nil
}

// cleanEntryName makes an archive name relative to the tree. Absolute names
// become relative; any ".." component is refused (even one that would stay
// inside: archives that need it are not worth the risk).
func cleanEntryName(name string) (string, error) {
	var parts []string
	for _, c := range strings.Split(name, "/") {
		switch c {
		case "", ".":
		case "..":
			return "", errors.New(`path has a ".." component`)
		default:
			parts = append(parts, c)
		}
	}
	return strings.Join(parts, "/"), nil
}

func beneath(dirFd int, rel string, flags int) (int, error) {
	return unix.Openat2(dirFd, rel, &unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// openParent returns an fd for the directory holding rel and rel's last
// component, creating missing parent directories (0755) when create is set.
func (x *extractor) openParent(rel string, create bool) (int, string, error) {
	dir, base := "", rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		dir, base = rel[:i], rel[i+1:]
	}
	if dir == "" {
		fd, err := unix.Dup(x.rootFd)
		return fd, base, err
	}
	fd, err := beneath(x.rootFd, dir, unix.O_PATH|unix.O_DIRECTORY)
	if err == nil || !create || !errors.Is(err, unix.ENOENT) {
		return fd, base, explainResolve(err)
	}
	cur, err := unix.Dup(x.rootFd)
	if err != nil {
		return -1, "", err
	}
	for _, c := range strings.Split(dir, "/") {
		next, err := beneath(cur, c, unix.O_PATH|unix.O_DIRECTORY)
		if errors.Is(err, unix.ENOENT) {
			if err := unix.Mkdirat(cur, c, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(cur)
				return -1, "", err
			}
			next, err = beneath(cur, c, unix.O_PATH|unix.O_DIRECTORY)
		}
		unix.Close(cur)
		if err != nil {
			return -1, "", explainResolve(err)
		}
		cur = next
	}
	return cur, base, nil
}

func explainResolve(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%w: a parent directory is a symlink (not followed)", errEntryRejected)
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%w: a parent is not a directory", errEntryRejected)
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%w: does not exist", errEntryRejected)
	}
	return err
}

// add writes one entry. Entries that are unsafe or unsupported are recorded
// in the report and skipped; only I/O failures are returned.
func (x *extractor) add(hdr *tar.Header, r io.Reader) error {
	rel, err := cleanEntryName(hdr.Name)
	if err != nil {
		return x.reject(hdr.Name, err.Error())
	}
	if rel == "" {
		return nil // the root itself
	}
	switch hdr.Typeflag {
	case tar.TypeChar, tar.TypeBlock:
		return x.reject(rel, "device node")
	case tar.TypeFifo:
		return x.reject(rel, "fifo")
	case tar.TypeDir, tar.TypeReg, tar.TypeSymlink, tar.TypeLink:
	default:
		return x.reject(rel, fmt.Sprintf("unsupported entry type %q", hdr.Typeflag))
	}
	mode := uint32(hdr.Mode) & 0o7777
	if mode&(unix.S_ISUID|unix.S_ISGID) != 0 && hdr.Typeflag != tar.TypeSymlink {
		mode &^= unix.S_ISUID | unix.S_ISGID
		x.rep.StrippedSetid = append(x.rep.StrippedSetid, rel)
	}
	pfd, base, err := x.openParent(rel, true)
	if err != nil {
		return x.fail(rel, err)
	}
	defer unix.Close(pfd)

	if hdr.Typeflag == tar.TypeDir {
		err := unix.Mkdirat(pfd, base, 0o700)
		if errors.Is(err, unix.EEXIST) {
			var st unix.Stat_t
			if err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return err
			}
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				if err := unix.Unlinkat(pfd, base, 0); err != nil {
					return x.fail(rel, err)
				}
				err = unix.Mkdirat(pfd, base, 0o700)
			} else {
				err = nil
			}
		}
		if err != nil {
			return x.fail(rel, err)
		}
		fd, err := unix.Openat(pfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return x.fail(rel, err)
		}
		defer unix.Close(fd)
		if err := x.own(fd, hdr); err != nil {
			return err
		}
		x.rep.Files++
		return unix.Fchmod(fd, mode)
	}

	// A later entry replaces an earlier file or symlink, never a directory
	// (but a later layer's does).
	if err := unix.Unlinkat(pfd, base, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		if !errors.Is(err, unix.EISDIR) {
			return x.fail(rel, err)
		}
		if !x.layers {
			return x.reject(rel, "a directory of that name exists")
		}
		if err := removeAt(pfd, base); err != nil {
			return x.fail(rel, err)
		}
	}
	switch hdr.Typeflag {
	case tar.TypeSymlink:
		if err := unix.Symlinkat(hdr.Linkname, pfd, base); err != nil {
			return x.fail(rel, err)
		}
		if x.root {
			unix.Fchownat(pfd, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW)
		}
	case tar.TypeLink:
		target, err := cleanEntryName(hdr.Linkname)
		if err != nil || target == "" {
			return x.reject(rel, "hard link target "+hdr.Linkname+" is outside the tree")
		}
		tfd, tbase, err := x.openParent(target, false)
		if err != nil {
			return x.fail(rel, fmt.Errorf("hard link target %s: %w", hdr.Linkname, err))
		}
		err = unix.Linkat(tfd, tbase, pfd, base, 0)
		unix.Close(tfd)
		if err != nil {
			return x.fail(rel, fmt.Errorf("%w: hard link to %s: %w", errEntryRejected, hdr.Linkname, err))
		}
	case tar.TypeReg:
		fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return x.fail(rel, err)
		}
		f := os.NewFile(uintptr(fd), rel)
		defer f.Close()
		if r != nil {
			if _, err := io.Copy(f, r); err != nil {
				return fmt.Errorf("write %s: %w", rel, err)
			}
		}
		if err := x.own(fd, hdr); err != nil {
			return err
		}
		if err := unix.Fchmod(fd, mode); err != nil {
			return err
		}
	}
	x.rep.Files++
	return nil
}

func (x *extractor) own(fd int, hdr *tar.Header) error {
	if !x.root {
		return nil
	}
	return unix.Fchown(fd, hdr.Uid, hdr.Gid)
}

// fail records err as a rejection when it is about the entry, and returns it
// when it is an I/O failure the import cannot survive.
func (x *extractor) fail(rel string, err error) error {
	if errors.Is(err, errEntryRejected) {
		return x.reject(rel, strings.TrimPrefix(err.Error(), errEntryRejected.Error()+": "))
	}
	if errors.Is(err, unix.ENOSPC) {
		return fmt.Errorf("%s: %w", rel, err) // Store.Create makes it ErrNoSpace
	}
	return fmt.Errorf("import %s: %w", rel, err)
}
