package sandboxinit

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container/internal/mnt"
)

// mountRootfs puts the rootfs at root as a read-only overlay of a
// detached clone of it (open_tree, not recursive; mnt.ReadOnlyOverlay). A
// bind of root would show the sandbox its host path in
// /proc/self/mountinfo: a bind's root field is its directory's path in the
// host's filesystem (/var/lib/nsbox/rootfs/NAME/rootfs); the overlay's is
// "/". Made in the sandbox's user namespace (overlayfs mounts there). A
// kernel that cannot make it (no overlayfs, or no layers by fd) gets the
// bind, as before.
func mountRootfs(root string) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, root, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("rootfs %s: open_tree: %w", root, err)
	}
	clone := os.NewFile(uintptr(fd), "rootfs")
	ov, err := mnt.ReadOnlyOverlay(clone, "/", false)
	if err != nil {
		clone.Close()
		if err := unix.Mount(root, root, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind rootfs %s: %w", root, err)
		}
		return nil
	}
	defer ov.Close()
	if err := unix.MoveMount(int(ov.Fd()), "", unix.AT_FDCWD, root, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("rootfs: attach its overlay: %w", err)
	}
	return nil
}
