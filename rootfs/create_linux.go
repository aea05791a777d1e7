package rootfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// PopulateFunc fills tree (an empty directory) and returns the parts of the
// metadata only it knows (Profile, Suite, Mirror, Python, Trim).
type PopulateFunc func(ctx context.Context, tree string) (Meta, error)

// Create is the one path by which a rootfs enters the store (rootfs/build and
// rootfs/importer are its populate functions): populate in a locked temp dir
// on the store's filesystem, prepare and describe the tree, then rename it
// into place atomically (swapping out the old one with force). A failed or
// cancelled Create leaves nothing behind; an ENOSPC from populate comes back
// as ErrNoSpace. progress (may be nil) hears the customize and finalize phases.
func (s Store) Create(ctx context.Context, name string, force bool, progress func(Progress), populate PopulateFunc) (*Rootfs, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = func(Progress) {}
	}
	if !force {
		if _, err := os.Stat(filepath.Join(s.entryDir(name), metaFile)); err == nil {
			return nil, fmt.Errorf("rootfs %q in %s: %w", name, s.root(), ErrExists)
		}
	}
	if err := os.MkdirAll(s.root(), 0o755); err != nil {
		return nil, fmt.Errorf("create rootfs store: %w", mapNoSpace(err))
	}
	s.cleanStale()

	tmp, err := os.MkdirTemp(s.root(), ".tmp-"+name+"-")
	if err != nil {
		return nil, fmt.Errorf("create rootfs %q: %w", name, mapNoSpace(err))
	}
	// The flock on the temp dir tells cleanStale a build is alive in it.
	tmpLock, err := os.Open(tmp)
	if err != nil {
		os.Remove(tmp)
		return nil, err
	}
	if err := flock(tmpLock, unix.LOCK_EX); err != nil {
		tmpLock.Close()
		os.Remove(tmp)
		return nil, err
	}
	installed := false
	defer func() {
		if !installed {
			removeTree(tmp)
		}
		tmpLock.Close()
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, err
	}
	tree := filepath.Join(tmp, "rootfs")
	if err := os.Mkdir(tree, 0o755); err != nil {
		return nil, mapNoSpace(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, lockFile), nil, 0o644); err != nil {
		return nil, mapNoSpace(err)
	}

	meta, err := populate(ctx, tree)
	if err != nil {
		return nil, mapNoSpace(err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	progress(Progress{Phase: "customize", Percent: -1, Message: "mount points, sandbox user, hostname"})
	if err := prepareTree(tree); err != nil {
		return nil, fmt.Errorf("prepare rootfs %q: %w", name, mapNoSpace(err))
	}
	progress(Progress{Phase: "finalize", Percent: -1, Message: "package list, digest"})
	meta.Name = name
	meta.Created = time.Now().UTC().Truncate(time.Second)
	meta.Packages, err = ReadPackages(tree)
	if err != nil {
		return nil, fmt.Errorf("rootfs %q: read package list: %w", name, err)
	}
	py, found := treePython(tree, meta.Packages)
	if meta.Python == "" {
		meta.Python = py
	}
	// An unknown version of a python3 that is there is given the benefit of
	// the doubt: a run then fails with Python's own error.
	meta.ArgvOnly = !found || (meta.Python != "" && !PythonSupported(meta.Python))
	meta.Digest, meta.SizeBytes, err = treeDigest(ctx, tree)
	if err != nil {
		return nil, fmt.Errorf("rootfs %q: digest: %w", name, err)
	}
	if err := writeMeta(tmp, meta); err != nil {
		return nil, fmt.Errorf("rootfs %q: %w", name, mapNoSpace(err))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.swapIn(tmp, name, force); err != nil {
		return nil, err
	}
	installed = true
	progress(Progress{Phase: "finalize", Percent: 100, Message: "installed as " + s.entryDir(name)})
	return s.load(name)
}

// swapIn renames the complete entry tmp to <Root>/<name>. With force an
// existing entry is exchanged atomically and then deleted, or left parked
// for a later cleanup when a sandbox still holds it.
func (s Store) swapIn(tmp, name string, force bool) error {
	final := s.entryDir(name)
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, final, unix.RENAME_NOREPLACE)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("install rootfs %q: %w", name, err)
	}
	if !force {
		if _, serr := os.Stat(filepath.Join(final, metaFile)); serr == nil {
			return fmt.Errorf("rootfs %q in %s: %w", name, s.root(), ErrExists)
		}
		// An entry without meta.json is garbage; replace it.
	}
	if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, final, unix.RENAME_EXCHANGE); err != nil {
		return fmt.Errorf("install rootfs %q: %w", name, err)
	}
	// tmp now holds the old entry. Park it under a name cleanStale knows.
	old, err := os.MkdirTemp(s.root(), ".old-"+name+"-")
	if err != nil {
		return nil // tmp (.tmp-*) is cleaned later all the same
	}
	if err := unix.Rename(tmp, old); err != nil {
		os.Remove(old)
		old = tmp
	}
	if unlock, err := tryLockEntry(old); err == nil {
		removeTree(old)
		unlock()
	}
	return nil
}

func mapNoSpace(err error) error {
	if errors.Is(err, unix.ENOSPC) && !errors.Is(err, ErrNoSpace) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}
