package importer

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/nsbox/nsbox/rootfs"
	"golang.org/x/sys/unix"
)

// Report says what an import kept and what it refused.
type Report struct {
	Files         int         // entries written
	Rejected      []Rejection // entries not imported, with why
	StrippedSetid []string    // paths whose setuid/setgid bits were removed
	Warnings      []string    // e.g. no /usr/bin/python3
}

// Rejection is one archive or directory entry that was not imported.
type Rejection struct {
	Path, Reason string
}

// Run makes the rootfs name in the store (through Store.Create) from src: a
// directory (copied: modes, owners, symlinks and hard links kept) or a tar
// archive, plain or gzip-compressed (detected by content, e.g. `docker
// export` output).
//
// Entries are written with a resolver that never follows a symlink, so an
// archive cannot write outside the tree. Absolute names are made relative
// (as GNU tar and docker do); names with ".." components, hard links to
// such names, device nodes, fifos and sockets are rejected and reported;
// setuid/setgid bits are stripped and reported; xattrs (and so file
// capabilities) are dropped. The tree then gets the sandbox user, mount
// points and /etc/hosts like a built one; its profile is "imported".
func Run(ctx context.Context, s rootfs.Store, name, src string, force bool) (*rootfs.Rootfs, *Report, error) {
	rep := &Report{}
	fi, err := os.Stat(src)
	if err != nil {
		return nil, rep, fmt.Errorf("import %s: %w", src, err)
	}
	r, err := s.Create(ctx, name, force, nil, func(ctx context.Context, tree string) (rootfs.Meta, error) {
		m := rootfs.Meta{Profile: "imported"}
		x, err := newExtractor(tree, rep)
		if err != nil {
			return m, err
		}
		defer x.close()
		if fi.IsDir() {
			err = x.copyDir(ctx, src)
		} else {
			err = x.extractFile(ctx, src)
		}
		return m, err
	})
	if err != nil {
		return nil, rep, err
	}
	if r.Meta.ArgvOnly {
		rep.Warnings = append(rep.Warnings, ArgvOnlyWarning(r.Meta))
	}
	return r, rep, nil
}

func (x *extractor) extractFile(ctx context.Context, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
		defer gz.Close()
		r = gz
	}
	return x.extractTar(ctx, r)
}

func (x *extractor) extractTar(ctx context.Context, r io.Reader) error {
	tr := tar.NewReader(r)
	for n := 0; ; n++ {
		if n%256 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			if n == 0 {
				return fmt.Errorf("%w: the archive is empty", ErrBadSource)
			}
			return nil
		}
		if err != nil {
			if n == 0 {
				return fmt.Errorf("%w: %w", ErrBadSource, err)
			}
			return fmt.Errorf("read archive: %w", err)
		}
		if err := x.add(hdr, tr); err != nil {
			return err
		}
	}
}

// copyDir imports a directory tree, turning it into the same entries a tar
// would carry (so one safe writer serves both).
func (x *extractor) copyDir(ctx context.Context, src string) error {
	links := map[[2]uint64]string{}
	n := 0
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n++; n%256 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		var target string
		if info.Mode()&fs.ModeSymlink != 0 {
			if target, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, target)
		if err != nil { // sockets
			return x.reject(rel, "not a file, directory or symlink: "+info.Mode().Type().String())
		}
		hdr.Name = rel
		if st, ok := info.Sys().(*syscall.Stat_t); ok && info.Mode().IsRegular() && st.Nlink > 1 {
			key := [2]uint64{st.Dev, st.Ino}
			if first, ok := links[key]; ok {
				hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
				return x.add(hdr, nil)
			}
			links[key] = rel
		}
		if !info.Mode().IsRegular() {
			return x.add(hdr, nil)
		}
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		return x.add(hdr, io.LimitReader(f, hdr.Size))
	})
}

// ArgvOnlyWarning says why a rootfs is argv-only and what that means.
func ArgvOnlyWarning(m rootfs.Meta) string {
	why := "no python3 in the sandbox's PATH (/usr/local/bin, /usr/bin, /bin, ...)"
	if m.Python != "" {
		why = "its python3 is " + m.Python + ", older than the " + rootfs.MinPython + " the runner needs"
	}
	return why + ": the rootfs is argv-only (commands, e.g. nsbox exec --rootfs " + m.Name + " -- CMD; no Python code or sessions)"
}

var errEntryRejected = errors.New("entry rejected")

func newExtractor(tree string, rep *Report) (*extractor, error) {
	fd, err := unix.Open(tree, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &extractor{rootFd: fd, rep: rep, root: os.Geteuid() == 0}, nil
}
