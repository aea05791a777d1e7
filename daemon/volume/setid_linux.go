package volume

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// maxStripDepth bounds stripSetID's descent (one open directory per level).
const maxStripDepth = 4096

// stripSetID clears the set-user-ID and set-group-ID bits of every regular
// file beneath root. Every mount nsbox makes of a volume is nosuid, but a
// copy of the image mounted elsewhere, or its files restored as root, would
// carry a sandbox's set-id program of the on-disk owner (an operator's
// owner_id may be an account's). Every step is relative to
// a directory fd and follows nothing (O_NOFOLLOW, AT_SYMLINK_NOFOLLOW, a
// file re-checked through its own O_PATH fd), so a tree a sandbox is still
// changing cannot send it outside root.
func stripSetID(root string) (stripped int, err error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("strip set-id bits: %w", err)
	}
	return stripDir(fd, 0)
}

// stripDir strips beneath the directory dfd, which it closes.
func stripDir(dfd, depth int) (int, error) {
	d := os.NewFile(uintptr(dfd), "volume directory")
	defer d.Close()
	if depth > maxStripDepth {
		return 0, fmt.Errorf("strip set-id bits: directories nested deeper than %d", maxStripDepth)
	}
	ents, err := d.ReadDir(-1)
	if err != nil {
		return 0, fmt.Errorf("strip set-id bits: %w", err)
	}
	n := 0
	var errs error
	for _, e := range ents {
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone meanwhile
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			cfd, err := unix.Openat(dfd, e.Name(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				continue
			}
			m, err := stripDir(cfd, depth+1)
			n += m
			if err != nil && errs == nil {
				errs = err
			}
		case unix.S_IFREG:
			if st.Mode&(unix.S_ISUID|unix.S_ISGID) == 0 {
				continue
			}
			ok, err := stripFile(dfd, e.Name())
			if ok {
				n++
			}
			if err != nil && errs == nil {
				errs = err
			}
		}
	}
	return n, errs
}

// stripFile clears name's set-id bits if it is (still) a regular file.
func stripFile(dfd int, name string) (bool, error) {
	fd, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, nil
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false, nil
	}
	// An O_PATH fd takes no fchmod; its /proc link names the inode itself.
	if err := unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), st.Mode&0o1777); err != nil {
		return false, fmt.Errorf("strip set-id bits of %s: %w", name, err)
	}
	return true, nil
}
