package volume

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container"
)

// DefaultOwnerID is the uid and gid that own a volume's files on disk
// unless the operator chooses another ([volumes] owner_id): the id just
// below the sandboxes' host ids (container.UIDBase), which no login and no
// sandbox has. Each sandbox sees it as its own user's (uid 1000) through
// its idmapped mount, so no host account owns what a sandbox wrote.
const DefaultOwnerID = container.UIDBase - 1

// LegacyOwnerID owned volume files before the on-disk owner was chosen:
// uid 1000, a real login on many hosts. Open moves such volumes over.
const LegacyOwnerID = container.SandboxUID

// ValidOwnerID checks an on-disk owner for volumes: not root, not the
// overflow id (65534) or -1, and outside the host ids nsbox gives
// sandboxes (those own processes; a volume's files must not be theirs).
func ValidOwnerID(id int) error {
	zygoteEnd := container.ZygoteUIDBase + (container.MaxZygoteChildren+1)*container.ZygoteBlocks
	switch {
	case id <= 0 || id >= 1<<32-1:
		return fmt.Errorf("%d: want 1 to %d", id, uint32(1<<32-2))
	case id == 65534:
		return fmt.Errorf("%d: the overflow id (nobody) is every unmapped id's", id)
	case id >= container.UIDBase && id < container.UIDBase+2*container.UIDSlots:
		return fmt.Errorf("%d: sandboxes' host ids are %d to %d", id, container.UIDBase, container.UIDBase+2*container.UIDSlots-1)
	case id >= container.ZygoteUIDBase && id < zygoteEnd:
		return fmt.Errorf("%d: zygotes' host ids are %d to %d", id, container.ZygoteUIDBase, zygoteEnd-1)
	}
	return nil
}

// adopt makes the volume mounted at root owned by to on disk: every inode
// whose uid (gid) is the root directory's is given to (to), the root
// last, so that a start interrupted half-way moves the rest at the next.
// It returns the owner the volume has after it: the root's old owner
// when nothing moved (a read-only mount), with the error.
func adopt(root string, to int) (owner, moved int, err error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, fmt.Errorf("on-disk owner: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return 0, 0, fmt.Errorf("on-disk owner: %w", err)
	}
	if int(st.Uid) == to && int(st.Gid) == to {
		unix.Close(fd)
		return to, 0, nil
	}
	c := chowner{fromUID: int(st.Uid), fromGID: int(st.Gid), to: to}
	// Held open past chownDir, which closes its own copy.
	keep, err := unix.Dup(fd)
	if err != nil {
		unix.Close(fd)
		return int(st.Uid), 0, fmt.Errorf("on-disk owner: %w", err)
	}
	defer unix.Close(keep)
	if err := c.chownDir(fd, 0); err != nil {
		return int(st.Uid), c.moved, err
	}
	if err := unix.Fchown(keep, to, to); err != nil {
		return int(st.Uid), c.moved, fmt.Errorf("on-disk owner of the root: %w", err)
	}
	return to, c.moved + 1, nil
}

// chowner moves the inodes of one old owner to another.
type chowner struct {
	fromUID, fromGID, to int
	moved                int
}

// chownDir moves every entry beneath the directory dfd, which it closes,
// relative to dfd and following no symlink (a symlink's own owner moves).
func (c *chowner) chownDir(dfd, depth int) error {
	d := os.NewFile(uintptr(dfd), "volume directory")
	defer d.Close()
	if depth > maxStripDepth {
		return fmt.Errorf("on-disk owner: directories nested deeper than %d", maxStripDepth)
	}
	ents, err := d.ReadDir(-1)
	if err != nil {
		return fmt.Errorf("on-disk owner: %w", err)
	}
	for _, e := range ents {
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("on-disk owner of %s: %w", e.Name(), err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			cfd, err := unix.Openat(dfd, e.Name(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("on-disk owner of %s: %w", e.Name(), err)
			}
			if err := c.chownDir(cfd, depth+1); err != nil {
				return err
			}
		}
		uid, gid := -1, -1 // -1: left as it is
		if int(st.Uid) == c.fromUID {
			uid = c.to
		}
		if int(st.Gid) == c.fromGID {
			gid = c.to
		}
		if uid == -1 && gid == -1 {
			continue
		}
		// chown clears set-id bits of a regular file, as the kernel does.
		if err := unix.Fchownat(dfd, e.Name(), uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("on-disk owner of %s: %w", e.Name(), err)
		}
		c.moved++
	}
	return nil
}
