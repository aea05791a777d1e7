package importer

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// The OCI image spec's whiteouts (image-spec layer.md): ".wh.NAME" hides
// NAME of the layers below; ".wh..wh..opq" in a directory hides all of the
// directory's contents below. Other ".wh..wh." names are aufs's own
// bookkeeping, skipped as docker does.
const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."
	whiteoutOpaque = ".wh..wh..opq"
)

// Layers writes an image's layers into a tree, one after another, with the
// rules of an import (nothing written outside the tree or through a
// symlink, setuid/setgid bits stripped and reported, owners kept as root)
// and stricter: an entry an import would skip (a ".." name, a device node,
// a fifo, a hard link out of the tree, a write whose parent is a symlink)
// fails the layer with ErrRefused. A later layer's entry replaces an
// earlier one of the same name, a directory included.
type Layers struct {
	x *extractor
}

// OpenLayers starts writing layers into tree, an empty directory (a
// Store.Create populate function's); rep collects what was stripped.
func OpenLayers(tree string, rep *Report) (*Layers, error) {
	x, err := newExtractor(tree, rep)
	if err != nil {
		return nil, err
	}
	x.strict, x.layers = true, true
	return &Layers{x: x}, nil
}

// Close releases the tree.
func (l *Layers) Close() { l.x.close() }

// Apply writes one layer, an uncompressed tar, over the tree, applying its
// whiteouts to the layers below. It reads r to its end, so that a reader
// that checks a digest at EOF gets there.
func (l *Layers) Apply(ctx context.Context, r io.Reader) error {
	tr := tar.NewReader(r)
	written := map[string]bool{} // this layer's paths: whiteouts spare them
	var opaque []string
	for n := 0; ; n++ {
		if n%256 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read layer: %w", err)
		}
		rel, err := cleanEntryName(hdr.Name)
		if err != nil {
			return l.x.reject(hdr.Name, err.Error())
		}
		dir, base := "", rel
		if i := strings.LastIndexByte(rel, '/'); i >= 0 {
			dir, base = rel[:i], rel[i+1:]
		}
		switch {
		case base == whiteoutOpaque:
			// The directory is this layer's, made if no entry made it.
			pfd, _, err := l.x.openParent(rel, true)
			if err != nil {
				return l.x.fail(rel, err)
			}
			unix.Close(pfd)
			opaque = append(opaque, dir)
			for p := dir; p != ""; p = parentOf(p) {
				written[p] = true
			}
		case strings.HasPrefix(base, whiteoutMeta):
		case strings.HasPrefix(base, whiteoutPrefix):
			name := base[len(whiteoutPrefix):]
			if name == "." || name == ".." {
				return l.x.reject(rel, "a whiteout of "+name)
			}
			hidden := name
			if dir != "" {
				hidden = dir + "/" + name
			}
			if written[hidden] {
				continue
			}
			if err := l.remove(hidden); err != nil {
				return err
			}
		default:
			if err := l.x.add(hdr, tr); err != nil {
				return err
			}
			for p := rel; p != ""; p = parentOf(p) {
				written[p] = true
			}
		}
	}
	for _, dir := range opaque {
		if err := l.clearBelow(dir, written); err != nil {
			return err
		}
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return fmt.Errorf("read layer: %w", err)
	}
	return nil
}

func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// remove deletes rel (a whole directory) from the tree, if it is there.
func (l *Layers) remove(rel string) error {
	dir, base := parentOf(rel), rel[strings.LastIndexByte(rel, '/')+1:]
	if base == "" {
		return l.x.reject(rel+whiteoutPrefix, "a whiteout that names no file")
	}
	var pfd int
	var err error
	if dir == "" {
		pfd, err = unix.Dup(l.x.rootFd)
	} else {
		pfd, err = beneath(l.x.rootFd, dir, unix.O_PATH|unix.O_DIRECTORY)
	}
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil // nothing of that name below
	}
	if err != nil {
		return l.x.fail(rel, fmt.Errorf("whiteout: %w", explainResolve(err)))
	}
	defer unix.Close(pfd)
	if err := removeAt(pfd, base); err != nil {
		return fmt.Errorf("whiteout %s: %w", rel, err)
	}
	return nil
}

// clearBelow deletes what dir holds from the layers below (an opaque
// whiteout): every path under it this layer did not write.
func (l *Layers) clearBelow(dir string, written map[string]bool) error {
	var fd int
	var err error
	if dir == "" {
		fd, err = unix.Dup(l.x.rootFd)
	} else {
		fd, err = beneath(l.x.rootFd, dir, unix.O_RDONLY|unix.O_DIRECTORY)
	}
	if err != nil {
		return l.x.fail(dir, fmt.Errorf("opaque whiteout: %w", explainResolve(err)))
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, name := range names {
		p := name
		if dir != "" {
			p = dir + "/" + name
		}
		if !written[p] {
			if err := removeAt(fd, name); err != nil {
				return fmt.Errorf("opaque whiteout %s: %w", p, err)
			}
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if err := l.clearBelow(p, written); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeAt deletes name in dirFd and, for a directory, all it holds,
// never following a symlink.
func removeAt(dirFd int, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("remove %q: not a name in its directory", name)
	}
	err := unix.Unlinkat(dirFd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) {
		return err
	}
	fd, err := unix.Openat(dirFd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	names, err := f.Readdirnames(-1)
	for _, n := range names {
		if err == nil {
			err = removeAt(fd, n)
		}
	}
	f.Close()
	if err != nil {
		return err
	}
	return unix.Unlinkat(dirFd, name, unix.AT_REMOVEDIR)
}
