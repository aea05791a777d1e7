package volume

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/sys/unix"
)

// mount checks volume name's image (e2fsck -p: a no-op on a clean one),
// attaches it to a free loop device with LO_FLAGS_AUTOCLEAR (the device
// detaches itself when its last mount goes: nothing to clean up after a
// crash but the mount) and mounts it nosuid,nodev (and read-only if ro)
// at its mount point. A mount a dead daemon left there is replaced.
func (s *Store) mount(name string, ro bool) error {
	img, p := s.image(name), s.Path(name)
	if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if isMountRoot(p) {
		s.log.Warn("replacing a volume mount left by a previous daemon", "volume", name, "path", p)
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount the stale %s: %w", p, err)
		}
	}
	// 0: clean; 1: errors fixed. Anything else needs an operator.
	if out, err := exec.Command("e2fsck", "-p", img).CombinedOutput(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			return fmt.Errorf("e2fsck -p %s: %v: %s", img, err, strings.TrimSpace(string(out)))
		}
	}
	dev, closeDev, err := attachLoop(img)
	if err != nil {
		return err
	}
	// The mount holds the device from here; autoclear then needs only it.
	defer closeDev()
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if ro {
		flags |= unix.MS_RDONLY
	}
	if err := unix.Mount(dev, p, "ext4", flags, ""); err != nil {
		return fmt.Errorf("mount %s on %s: %w", dev, p, err)
	}
	return nil
}

// attachLoop attaches img to a free loop device (LOOP_CONFIGURE, which
// sets the file and its flags in one step) and returns the device's path
// and a func that closes the engine's fd of it: with autoclear, the
// device detaches itself at the last close, so the caller mounts it
// before calling closeDev.
func attachLoop(img string) (dev string, closeDev func(), err error) {
	f, err := os.OpenFile(img, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	ctl, err := unix.Open("/dev/loop-control", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("loop devices: %w", err)
	}
	defer unix.Close(ctl)
	// Another process may take the free device between GET_FREE and
	// CONFIGURE (EBUSY): ask again.
	for range 16 {
		n, err := unix.IoctlRetInt(ctl, unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", nil, fmt.Errorf("free loop device: %w", err)
		}
		dev = fmt.Sprintf("/dev/loop%d", n)
		fd, err := unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", nil, fmt.Errorf("open %s: %w", dev, err)
		}
		cfg := unix.LoopConfig{Fd: uint32(f.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], img)
		err = unix.IoctlLoopConfigure(fd, &cfg)
		if err == nil {
			return dev, func() { unix.Close(fd) }, nil
		}
		unix.Close(fd)
		if !errors.Is(err, unix.EBUSY) {
			return "", nil, fmt.Errorf("attach %s to %s: %w", img, dev, err)
		}
	}
	return "", nil, fmt.Errorf("attach %s: no free loop device after 16 tries", img)
}

// isMountRoot reports whether p is the root of a mount.
func isMountRoot(p string) bool {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &st); err != nil {
		return false
	}
	return st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 && st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
}

// unmount unmounts the volume at p; a busy mount (a file API call still
// has it open) is detached lazily. Not mounted is no error.
func unmount(p string) error {
	err := unix.Unmount(p, 0)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(p, unix.MNT_DETACH)
	}
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		err = nil
	}
	if err == nil {
		os.Remove(p)
	}
	return err
}
