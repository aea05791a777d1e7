// Package mnt makes the detached mounts a sandbox attaches under /mnt:
// the read-only tmpfs that holds their mount points, and idmapped clones
// of host directories, with the cache of the user namespaces that map
// their on-disk owners to a sandbox's host id. It knows nothing of specs
// or sandboxes; package container says which mounts a sandbox gets.
package mnt

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Tmpfs makes the tmpfs the sandbox sees at /mnt: a detached mount,
// made here because a zygote's child cannot create inodes in a filesystem
// of its own (its root is unmapped in its user namespace), holding one
// empty directory per name, then made read-only. The sandbox attaches it
// at /mnt and its mounts on those directories (a read-only mount may
// still be mounted on).
func Tmpfs(names []string) (*os.File, error) {
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

// Clone returns a detached, non-recursive clone of the directory source
// (open_tree OPEN_TREE_CLONE), idmapped through the user namespace ns,
// nosuid and nodev, read-only or noexec as asked; target names it in
// errors and in the file's name.
func Clone(source, target string, readOnly, noExec bool, ns *os.File) (*os.File, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("mount %s: open_tree %s: %w", target, source, err)
	}
	attr := unix.MountAttr{
		Attr_set:  unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Userns_fd: uint64(ns.Fd()),
	}
	if readOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if noExec {
		attr.Attr_set |= unix.MOUNT_ATTR_NOEXEC
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("mount %s: idmap %s (does its filesystem support idmapped mounts?): %w", target, source, err)
	}
	return os.NewFile(uintptr(fd), "mount:"+target), nil
}

// Key names one idmap user namespace: on-disk ids to a host id.
type Key struct{ DiskUID, DiskGID, Host int }

// Cache caches the user namespaces of idmapped mounts: making one forks
// a process (about a millisecond), and a host id keeps its sandbox user
// for the engine's life. The cache is bounded; a full one is emptied.
type Cache struct {
	mu sync.Mutex
	m  map[Key]*os.File
}

// maxCached bounds the cache (one fd each).
const maxCached = 1024

// Get returns the user namespace of k, made on first use; the cache owns
// the file.
func (c *Cache) Get(k Key) (*os.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.m[k]; ok {
		return f, nil
	}
	if c.m == nil || len(c.m) >= maxCached {
		c.closeLocked()
		c.m = map[Key]*os.File{}
	}
	f, err := NewUserns(k)
	if err != nil {
		return nil, err
	}
	c.m[k] = f
	return f, nil
}

// Close closes every namespace the cache holds.
func (c *Cache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked()
}

func (c *Cache) closeLocked() {
	for _, f := range c.m {
		f.Close()
	}
	c.m = nil
}

// NewUserns makes a user namespace whose maps send k's on-disk uid and gid
// to its host id, and returns its nsfs fd; nothing ever runs in it. As
// containerd does (mount.getUsernsFD), a process is started in a new user
// namespace with PTRACE_TRACEME, so it stops at its exec before running a
// single instruction of the binary; its namespace is opened and it is
// killed. The namespace lives on as long as the fd.
func NewUserns(k Key) (*os.File, error) {
	// The tracer is the forking thread; keep it for the kill and reap.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	uids := []syscall.SysProcIDMap{{ContainerID: k.DiskUID, HostID: k.Host, Size: 1}}
	gids := []syscall.SysProcIDMap{{ContainerID: k.DiskGID, HostID: k.Host, Size: 1}}
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
