package rootfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

const lockFile = ".lock"

// Acquire takes a shared lock on the rootfs for as long as a sandbox uses it;
// Remove and a --force rebuild will not delete a tree while any is held.
// Call release when the sandbox is gone.
func (r *Rootfs) Acquire() (release func(), err error) {
	lp := r.lockPath
	if lp == "" {
		lp = filepath.Join(filepath.Dir(r.Dir), lockFile)
	}
	for range 10 {
		f, err := os.Open(lp)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("rootfs %q: %w", r.Name, ErrNotFound)
			}
			return nil, fmt.Errorf("rootfs %q: lock: %w", r.Name, err)
		}
		if err := flock(f, unix.LOCK_SH); err != nil {
			f.Close()
			return nil, fmt.Errorf("rootfs %q: lock: %w", r.Name, err)
		}
		// The entry may have been replaced or removed while we waited: make
		// sure the lock we hold is the one at the path now.
		if sameFile(f, lp) {
			var once sync.Once
			return func() { once.Do(func() { f.Close() }) }, nil
		}
		f.Close()
		if _, err := os.Stat(filepath.Dir(lp)); err != nil {
			return nil, fmt.Errorf("rootfs %q: %w", r.Name, ErrNotFound)
		}
	}
	return nil, fmt.Errorf("rootfs %q: lock keeps changing (concurrent rebuilds?)", r.Name)
}

func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			return err
		}
	}
}

func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// tryLockEntry takes the entry's .lock exclusively without waiting. It
// returns ErrInUse when a sandbox holds it. A missing lock file counts as free.
func tryLockEntry(entryDir string) (unlock func(), err error) {
	f, err := os.Open(filepath.Join(entryDir, lockFile))
	if errors.Is(err, fs.ErrNotExist) {
		return func() {}, nil
	}
	if err != nil {
		return nil, err
	}
	if err := flock(f, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, ErrInUse
		}
		return nil, err
	}
	return func() { f.Close() }, nil
}

// Remove deletes the rootfs called name. It refuses with ErrInUse while a
// sandbox holds it.
func (s Store) Remove(name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	dir := s.entryDir(name)
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("rootfs %q in %s: %w", name, s.root(), ErrNotFound)
	}
	unlock, err := tryLockEntry(dir)
	if err != nil {
		return fmt.Errorf("remove rootfs %q: %w: stop the sandboxes using it first", name, err)
	}
	defer unlock()
	parked, err := s.park(name)
	if err != nil {
		return fmt.Errorf("remove rootfs %q: %w", name, err)
	}
	if err := removeTree(parked); err != nil {
		return fmt.Errorf("remove rootfs %q: %w", name, err)
	}
	return nil
}

// park renames an entry aside to .old-<name>-<rand> so it disappears from
// List at once.
func (s Store) park(name string) (string, error) {
	tmp, err := os.MkdirTemp(s.root(), ".old-"+name+"-")
	if err != nil {
		return "", err
	}
	// rename(2) atomically replaces the empty directory tmp (os.Rename refuses to).
	if err := unix.Rename(s.entryDir(name), tmp); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// cleanStale removes leftovers of interrupted builds and parked trees that
// no sandbox and no running build holds any more.
func (s Store) cleanStale() {
	ents, err := os.ReadDir(s.root())
	if err != nil {
		return
	}
	for _, e := range ents {
		n := e.Name()
		if !e.IsDir() || !(strings.HasPrefix(n, ".tmp-") || strings.HasPrefix(n, ".old-")) {
			continue
		}
		p := filepath.Join(s.root(), n)
		d, err := os.Open(p)
		if err != nil {
			continue
		}
		if flock(d, unix.LOCK_EX|unix.LOCK_NB) != nil { // a build is running in it
			d.Close()
			continue
		}
		if unlock, err := tryLockEntry(p); err == nil {
			removeTree(p)
			unlock()
		}
		d.Close()
	}
}
