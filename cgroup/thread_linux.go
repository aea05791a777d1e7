package cgroup

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// A v1 migration of a whole process, or of a thread named by its id, takes
// the kernel's cgroup_threadgroup_rwsem for writing, and after an idle
// spell that waits for an RCU grace period (9-12 ms here). A thread that
// moves itself (writes "0" to tasks) does not take it: it cannot exit or
// exec under the kernel's hands (cgroup_procs_write_start), so the move
// costs ~20 µs. A child inherits the cgroups of the thread that cloned it,
// so a thread that steps into a sandbox cgroup, clones, and steps out
// again places the child without any migration of it.

// EnterThread moves the calling OS thread, alone, into the cgroup in every
// v1 hierarchy. The caller must hold runtime.LockOSThread, and must not be
// the thread group leader: on v1 the leader's memory cgroup is where the
// whole process's memory is charged. v1 only: a v2 cgroup takes processes,
// not threads (ErrController).
func (c *Cgroup) EnterThread() error {
	if c.v2 {
		return fmt.Errorf("cgroup %s: move a thread: %w", c.id, ErrController)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return enterThread(c.hier)
}

// EnterThread moves the calling OS thread, alone, into the manager's
// parent cgroup (<own>/<name>) in every v1 hierarchy: the home of a thread
// that steps into sandbox cgroups (Cgroup.EnterThread) and back. The same
// rules hold as for Cgroup.EnterThread.
func (m *Manager) EnterThread() error {
	if m.v2 {
		return fmt.Errorf("cgroup parent %s: move a thread: %w", m.name, ErrController)
	}
	dirs := make([]*dir, len(m.hier))
	for i, p := range m.hier {
		dirs[i] = pathDir(p)
	}
	return enterThread(dirs)
}

// TaskFiles opens the cgroup's tasks file in every v1 hierarchy, for a
// single-threaded process that has not started yet to place itself: it
// writes "0" to each, a thread moving itself, which takes no global lock
// (above): no grace period, and no cgroup_mutex held through one for
// every other cgroup operation on the host to queue behind. The kernel
// checks such a write against the credentials the file was opened with
// (__cgroup1_procs_write), so the process needs no rights of its own on
// the cgroup. The caller closes the files; v1 only (ErrController).
func (c *Cgroup) TaskFiles() ([]*os.File, error) {
	if c.v2 {
		return nil, fmt.Errorf("cgroup %s: tasks files: %w", c.id, ErrController)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	fs := make([]*os.File, 0, len(c.hier))
	for _, d := range c.hier {
		fd, err := d.open("tasks", unix.O_WRONLY)
		if err != nil {
			for _, f := range fs {
				f.Close()
			}
			return nil, fmt.Errorf("cgroup %s: %w", c.id, err)
		}
		fs = append(fs, os.NewFile(uintptr(fd), d.join("tasks")))
	}
	return fs, nil
}

// Hierarchies is how many hierarchies the cgroup spans: the lines of a
// member's /proc/<pid>/cgroup that name it (1 on v2).
func (c *Cgroup) Hierarchies() int { return len(c.hier) }

func enterThread(dirs []*dir) error {
	if unix.Gettid() == unix.Getpid() {
		return ErrLeader
	}
	for _, d := range dirs {
		if err := writeFile(d, "tasks", "0"); err != nil {
			return fmt.Errorf("move a thread: %w", err)
		}
	}
	return nil
}
