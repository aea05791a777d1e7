package mnt

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ReadOnlyOverlay returns a detached, read-only overlay whose one real
// layer is the detached mount lower (closed once the overlay is made;
// left open on an error, for the caller to use as it is), with an empty tmpfs
// under it (an overlay without an upper layer needs two): nosuid, nodev,
// and noexec as asked. A clone of a host directory that is not its
// filesystem's root shows that directory's host path as its root in the
// sandbox's /proc/self/mountinfo; the overlay's root is "/", its source
// "none", and a layer given by fd is named by its path in its own
// detached mount, "/". Layers by fd came in Linux 6.13, detached mounts
// as layers in 6.15; before, this fails.
func ReadOnlyOverlay(lower *os.File, target string, noExec bool) (*os.File, error) {
	empty, err := EmptyLayer()
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", target, err)
	}
	defer unix.Close(empty)
	fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("mount %s: fsopen overlay: %w", target, err)
	}
	defer unix.Close(fsfd)
	for _, fd := range []int{int(lower.Fd()), empty} {
		if err := unix.FsconfigSetFd(fsfd, "lowerdir+", fd); err != nil {
			return nil, fmt.Errorf("mount %s: overlay layer: %w", target, err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, fmt.Errorf("mount %s: overlay: %w", target, err)
	}
	attr := unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	if noExec {
		attr |= unix.MOUNT_ATTR_NOEXEC
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, attr)
	if err != nil {
		return nil, fmt.Errorf("mount %s: fsmount overlay: %w", target, err)
	}
	lower.Close()
	return os.NewFile(uintptr(mfd), "mount:"+target), nil
}

// EmptyLayer is a detached, read-only tmpfs with nothing in it: the
// second layer of an overlay that has no upper one.
func EmptyLayer() (int, error) {
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsopen tmpfs: %w", err)
	}
	defer unix.Close(fsfd)
	for _, o := range [][2]string{{"size", "4k"}, {"nr_inodes", "1"}, {"mode", "0755"}} {
		if err := unix.FsconfigSetString(fsfd, o[0], o[1]); err != nil {
			return -1, fmt.Errorf("empty layer %s=%s: %w", o[0], o[1], err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return -1, fmt.Errorf("empty layer: %w", err)
	}
	fd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsmount the empty layer: %w", err)
	}
	return fd, nil
}
