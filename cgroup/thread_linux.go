package cgroup

import (
	"fmt"

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
