package container

import (
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/nsbox/nsbox/container/internal/cleanup"
	"github.com/nsbox/nsbox/container/internal/mnt"
	"github.com/nsbox/nsbox/rootfs"
)

// MaxMounts is how many Spec.Mounts one sandbox may have: each is an fd in
// the init's config message and in a zygote's fork request (whose
// SCM_RIGHTS buffer holds 16 fds: 5 of the child's own, the /mnt tmpfs
// and the mounts).
const MaxMounts = 8

// MountDir is the directory under which every Spec.Mounts target lies.
const MountDir = "/mnt"

// ValidMountName checks the NAME of a /mnt/NAME target: 1 to 63 of a-z,
// 0-9, '.', '_' and '-', starting with a letter or digit (the rootfs and
// volume name rule), so it is one path element, never "." or "..".
func ValidMountName(name string) error {
	if rootfs.ValidName(name) != nil {
		return fmt.Errorf("mount name %q: use 1 to 63 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit", name)
	}
	return nil
}

// MountName returns NAME of a valid target /mnt/NAME.
func MountName(target string) (string, error) {
	dir, name := path.Split(target)
	if dir != MountDir+"/" {
		return "", fmt.Errorf("mount target %q: must be %s/NAME", target, MountDir)
	}
	if err := ValidMountName(name); err != nil {
		return "", err
	}
	return name, nil
}

func validMounts(ms []Mount) error {
	if len(ms) > MaxMounts {
		return fmt.Errorf("%w: %d mounts, at most %d", ErrInvalidSpec, len(ms), MaxMounts)
	}
	seen := map[string]bool{}
	for _, m := range ms {
		name, err := MountName(m.Target)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidSpec, err)
		}
		if seen[name] {
			return fmt.Errorf("%w: mount target %s given twice", ErrInvalidSpec, m.Target)
		}
		seen[name] = true
		if !filepath.IsAbs(m.Source) {
			return fmt.Errorf("%w: mount source %q is not an absolute path", ErrInvalidSpec, m.Source)
		}
		if m.OwnerUID < 0 || m.OwnerGID < 0 {
			return fmt.Errorf("%w: mount owner ids must not be negative", ErrInvalidSpec)
		}
	}
	return nil
}

// mountNames are the NAMEs of valid mounts, in order.
func mountNames(ms []Mount) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = path.Base(m.Target)
	}
	return out
}

// openMounts prepares ms for a sandbox whose user is host id owner: first
// the tmpfs for /mnt that holds their mount points (mnt.Tmpfs), then each
// mount, a detached clone of its source (open_tree OPEN_TREE_CLONE, not
// recursive: mounts below the source are not carried), idmapped so that
// the mount's OwnerUID/OwnerGID on disk are owner, nosuid and nodev, and
// read-only or noexec as asked; a read-only one under a read-only overlay
// (mnt.ReadOnlyOverlay), so that the sandbox's mountinfo does not show
// its host path. No mounts: no files. The caller closes
// the files once the sandbox has attached them (or failed).
func (e *Engine) openMounts(ms []Mount, owner int) (_ []*os.File, err error) {
	if len(ms) == 0 {
		return nil, nil
	}
	var out []*os.File
	cu := cleanup.Make(func() {
		for _, f := range out {
			f.Close()
		}
	})
	defer cu.Clean()
	tmp, err := mnt.Tmpfs(mountNames(ms))
	if err != nil {
		return nil, err
	}
	out = append(out, tmp)
	for _, m := range ms {
		ns, err := e.idmaps.Get(mnt.Key{DiskUID: m.OwnerUID, DiskGID: m.OwnerGID, Host: owner})
		if err != nil {
			return nil, fmt.Errorf("mount %s: %w", m.Target, err)
		}
		f, err := mnt.Clone(m.Source, m.Target, m.ReadOnly, m.NoExec, ns)
		if err != nil {
			return nil, err
		}
		// A read-only mount (a dataset) stays a clone of the host's
		// directory, not an overlay over it: an overlay's view of a lower
		// directory the host changes is undefined (a file created there
		// later stayed unseen), and a dataset is a live view. Its host path
		// shows in the sandbox's mountinfo.
		out = append(out, f)
	}
	cu.Release()
	return out, nil
}

// IdmapSupported reports whether dir can be mounted in sandboxes (its
// filesystem takes idmapped mounts on this kernel: ext4, xfs, btrfs from
// Linux 5.12, tmpfs from 6.3), by making, and dropping, one such mount.
func IdmapSupported(dir string) error {
	ns, err := mnt.NewUserns(mnt.Key{DiskUID: 0, DiskGID: 0, Host: 65534})
	if err != nil {
		return err
	}
	defer ns.Close()
	f, err := mnt.Clone(dir, "/mnt/probe", false, false, ns)
	if err != nil {
		return err
	}
	return f.Close()
}
