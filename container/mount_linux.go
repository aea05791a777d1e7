package container

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container/internal/cleanup"
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
// the tmpfs for /mnt that holds their mount points (mntTmpfs), then each
// mount, a detached clone of its source (open_tree OPEN_TREE_CLONE, not
// recursive: mounts below the source are not carried), idmapped so that
// the mount's OwnerUID/OwnerGID on disk are owner, nosuid and nodev, and
// read-only or noexec as asked. No mounts: no files. The caller closes
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
	tmp, err := mntTmpfs(mountNames(ms))
	if err != nil {
		return nil, err
	}
	out = append(out, tmp)
	for _, m := range ms {
		ns, err := e.idmaps.get(idmapKey{diskUID: m.OwnerUID, diskGID: m.OwnerGID, host: owner})
		if err != nil {
			return nil, fmt.Errorf("mount %s: %w", m.Target, err)
		}
		f, err := cloneIdmapped(m, ns)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	cu.Release()
	return out, nil
}

// mntTmpfs makes the tmpfs the sandbox sees at /mnt: a detached mount,
// made here because a zygote's child cannot create inodes in a filesystem
// of its own (its root is unmapped in its user namespace), holding one
// empty directory per name, then made read-only. The sandbox attaches it
// at /mnt and its mounts on those directories (a read-only mount may
// still be mounted on).
func mntTmpfs(names []string) (*os.File, error) {
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("fsopen tmpfs for /mnt: %w", err)
	}
	defer unix.Close(fsfd)
	for _, o := range [][2]string{{"size", "4k"}, {"nr_inodes", fmt.Sprint(len(names) + 2)}, {"mode", "0755"}} {
		if err := unix.FsconfigSetString(fsfd, o[0], o[1]); err != nil {
			return nil, fmt.Errorf("tmpfs for /mnt: %s=%s: %w", o[0], o[1], err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, fmt.Errorf("tmpfs for /mnt: %w", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return nil, fmt.Errorf("fsmount tmpfs for /mnt: %w", err)
	}
	f := os.NewFile(uintptr(mfd), "mount:/mnt")
	for _, n := range names {
		if err := unix.Mkdirat(mfd, n, 0o755); err != nil {
			f.Close()
			return nil, fmt.Errorf("mkdir /mnt/%s: %w", n, err)
		}
	}
	if err := unix.MountSetattr(mfd, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		f.Close()
		return nil, fmt.Errorf("make the tmpfs for /mnt read-only: %w", err)
	}
	return f, nil
}

func cloneIdmapped(m Mount, ns *os.File) (*os.File, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, m.Source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("mount %s: open_tree %s: %w", m.Target, m.Source, err)
	}
	attr := unix.MountAttr{
		Attr_set:  unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Userns_fd: uint64(ns.Fd()),
	}
	if m.ReadOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if m.NoExec {
		attr.Attr_set |= unix.MOUNT_ATTR_NOEXEC
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("mount %s: idmap %s (does its filesystem support idmapped mounts?): %w", m.Target, m.Source, err)
	}
	return os.NewFile(uintptr(fd), "mount:"+m.Target), nil
}

// idmapKey names one idmap user namespace: on-disk ids to a host id.
type idmapKey struct{ diskUID, diskGID, host int }

// idmaps caches the user namespaces of idmapped mounts: making one forks
// a process (about a millisecond), and a host id keeps its sandbox user
// for the engine's life. The cache is bounded; a full one is emptied.
type idmaps struct {
	mu sync.Mutex
	m  map[idmapKey]*os.File
}

// maxIdmaps bounds the cache (one fd each).
const maxIdmaps = 1024

func (c *idmaps) get(k idmapKey) (*os.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.m[k]; ok {
		return f, nil
	}
	if c.m == nil || len(c.m) >= maxIdmaps {
		c.closeLocked()
		c.m = map[idmapKey]*os.File{}
	}
	f, err := newIdmap(k)
	if err != nil {
		return nil, err
	}
	c.m[k] = f
	return f, nil
}

func (c *idmaps) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked()
}

func (c *idmaps) closeLocked() {
	for _, f := range c.m {
		f.Close()
	}
	c.m = nil
}

// newIdmap makes a user namespace whose maps send k's on-disk uid and gid
// to its host id, and returns its nsfs fd; nothing ever runs in it. As
// containerd does (mount.getUsernsFD), a process is started in a new user
// namespace with PTRACE_TRACEME, so it stops at its exec before running a
// single instruction of the binary; its namespace is opened and it is
// killed. The namespace lives on as long as the fd.
func newIdmap(k idmapKey) (*os.File, error) {
	// The tracer is the forking thread; keep it for the kill and reap.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	uids := []syscall.SysProcIDMap{{ContainerID: k.diskUID, HostID: k.host, Size: 1}}
	gids := []syscall.SysProcIDMap{{ContainerID: k.diskGID, HostID: k.host, Size: 1}}
	p, err := os.StartProcess("/proc/self/exe", []string{"nsbox-idmap"}, &os.ProcAttr{
		Env: []string{},
		Sys: &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: uids,
			GidMappings: gids,
			Ptrace:      true,
			Pdeathsig:   syscall.SIGKILL,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("idmap user namespace: %w", err)
	}
	defer func() {
		p.Kill()
		p.Wait()
	}()
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", p.Pid))
	if err != nil {
		return nil, fmt.Errorf("idmap user namespace: %w", err)
	}
	return f, nil
}

// IdmapSupported reports whether dir can be mounted in sandboxes (its
// filesystem takes idmapped mounts on this kernel: ext4, xfs, btrfs from
// Linux 5.12, tmpfs from 6.3), by making, and dropping, one such mount.
func IdmapSupported(dir string) error {
	ns, err := newIdmap(idmapKey{diskUID: 0, diskGID: 0, host: 65534})
	if err != nil {
		return err
	}
	defer ns.Close()
	f, err := cloneIdmapped(Mount{Source: dir, Target: "/mnt/probe"}, ns)
	if err != nil {
		return err
	}
	return f.Close()
}
