package container

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/cgroup"
	"github.com/nsbox/nsbox/container/internal/cleanup"
	"github.com/nsbox/nsbox/container/internal/locks"
	"github.com/nsbox/nsbox/container/internal/verify"
	"github.com/nsbox/nsbox/container/internal/zyproto"
)

// zygoteChild is a sandbox whose main process is a child of a zygote, from
// slot to teardown.
type zygoteChild struct {
	z      *Zygote
	name   string
	slot   int
	hostID int
	live   *locks.Live
	cg     *cgroup.Cgroup
	zpid   int // pid in the zygote's namespace
	hpid   int // host pid
	pidfd  int

	files *zyproto.ChildFiles
	// selfPlaced: the child moves itself into cg (v1), not the engine.
	selfPlaced bool

	exitOnce    sync.Once
	exited      chan struct{}
	status      syscall.WaitStatus
	destroyOnce sync.Once
}

// newChild takes a slot of the zygote's for d's sandbox, with its liveness
// lock, cgroup, run socket and pipes; launch has the zygote fork it.
func (z *Zygote) newChild(d *description) (_ process, err error) {
	c := &zygoteChild{z: z, name: d.id, slot: -1, pidfd: -1, exited: make(chan struct{})}
	cu := cleanup.Make(c.destroy)
	defer cu.Clean()
	z.mu.Lock()
	if len(z.free) > 0 {
		c.slot = z.free[len(z.free)-1]
		z.free = z.free[:len(z.free)-1]
	}
	z.mu.Unlock()
	if c.slot < 0 {
		return nil, fmt.Errorf("%w: the zygote has %d children alive, its most", ErrNoUIDs, z.cfg.Children)
	}
	c.hostID = z.block.ChildID(c.slot)
	if c.live, err = locks.AcquireLive(z.e.liveDir, d.id); err != nil {
		return nil, err
	}
	if c.cg, err = z.e.cgroups.Create(d.id, d.cgroupLimits()); err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	if c.files, err = zyproto.NewChildFiles(); err != nil {
		return nil, err
	}
	cu.Release()
	return c, nil
}

func (c *zygoteChild) owner() int             { return c.hostID }
func (c *zygoteChild) cgroup() *cgroup.Cgroup { return c.cg }
func (c *zygoteChild) pid() int               { return c.hpid }
func (c *zygoteChild) done() <-chan struct{}  { return c.exited }

// wait waits for the zygote's report of the child's exit.
func (c *zygoteChild) wait() (syscall.WaitStatus, bool) {
	<-c.exited
	return c.status, true
}

// hasExited is the zygote's report, or else the child's pidfd: it turns
// readable at the exit, before the zygote has reaped and reported it.
func (c *zygoteChild) hasExited() bool {
	select {
	case <-c.done():
		return true
	default:
	}
	if c.pidfd < 0 {
		return false
	}
	fds := []unix.PollFd{{Fd: int32(c.pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

func (c *zygoteChild) stdio() (stdout, stderr, stdin, control *os.File) {
	f := c.files
	stdin, f.Stdin = f.Stdin, nil
	return f.Stdout, f.Stderr, stdin, f.Run
}

// launch has the zygote fork the child with d's request, then sets it up
// and verifies it (setUp) before it gets d's command.
func (c *zygoteChild) launch(d *description, mounts []*os.File) error {
	req := d.zygoteRequest(c.slot, c.z.e.cfg.Seccomp, c.z.testSkip)
	// On v1 the child places itself, through its cgroup's tasks files
	// (cgroup.TaskFiles): a migration by the engine would take the
	// kernel's global migration lock, which waits an RCU grace period
	// after an idle spell with cgroup_mutex held. On v2 the engine moves
	// it (setUp), with that grace period kept passed (keepWarm).
	tasks, err := c.cg.TaskFiles()
	switch {
	case errors.Is(err, cgroup.ErrController):
		c.z.warmMigration()
	case err != nil:
		return err
	}
	c.selfPlaced, req.Tasks = len(tasks) > 0, len(tasks)
	// The child's ends of its socket and pipes are closed here whatever
	// happens: the zygote has them, or the fork failed.
	err = c.z.conn.Fork(req, slices.Concat(c.files.Theirs(), mounts, tasks), c)
	c.files.CloseTheirs()
	for _, f := range tasks {
		f.Close()
	}
	if err != nil {
		return err
	}
	run := zyproto.HoldArgs(zyproto.Run{Argv: d.argv, Env: d.env}, c.z.cfg.Held)
	if err := c.setUp(run, d.beforeStart); err != nil {
		return fmt.Errorf("zygote child: %w", err)
	}
	c.z.forks.Add(1)
	return nil
}

// Forked learns the child's pid in the zygote's namespace (zyproto.Child).
func (c *zygoteChild) Forked(zpid int) { c.zpid = zpid }

// Exited reports the child's exit (zyproto.Child).
func (c *zygoteChild) Exited(ws syscall.WaitStatus) {
	c.exitOnce.Do(func() {
		c.status = ws
		close(c.exited)
	})
}

func (c *zygoteChild) signal(sig syscall.Signal) error {
	if c.pidfd < 0 {
		return unix.ESRCH
	}
	return unix.PidfdSendSignal(c.pidfd, sig, nil, 0)
}

// setUp is the engine's half of the child's set-up: learn its host pid,
// place it in its cgroup, verify what it made of itself, run beforeStart
// (Spec.BeforeStart) and say go with the run's command and environment.
func (c *zygoteChild) setUp(run zyproto.Run, beforeStart func(pid int) error) error {
	if err := c.files.Run.SetDeadline(time.Now().Add(zygoteSetupTimeout)); err != nil {
		return err
	}
	h := &zyproto.Handshake{Sock: c.files.Run, Stderr: c.files.Stderr}
	pid, err := h.Hello()
	if err != nil {
		return err
	}
	// The pid is the kernel's; make sure it names our child, then hold it
	// by a pidfd so that a recycled pid can never be signalled.
	if c.pidfd, err = unix.PidfdOpen(pid, 0); err != nil {
		return fmt.Errorf("pidfd of %d: %w", pid, err)
	}
	c.hpid = pid
	if err := verify.Child(pid, c.zpid); err != nil {
		return err
	}
	if !c.selfPlaced {
		if err := c.cg.Add(pid); err != nil {
			return err
		}
	}
	if err := h.Placed(); err != nil {
		return err
	}
	if err := h.Expect('R'); err != nil {
		return err
	}
	// From the host: its credentials, capabilities, no_new_privs, seccomp,
	// id map, cgroup, and that none of its namespaces is the zygote's or
	// the engine's.
	want := verify.Want{HostID: c.hostID, SandboxUID: SandboxUID, Cgroup: c.name, CgroupLines: c.cg.Hierarchies(),
		Foreign: []map[string]string{c.z.ns, c.z.hostNS}}
	if err := verify.Sandboxed(pid, want); err != nil {
		return fmt.Errorf("verification failed, the child never got its code: %w", err)
	}
	if beforeStart != nil {
		if err := beforeStart(pid); err != nil {
			return err
		}
	}
	if err := h.Go(run); err != nil {
		return err
	}
	return c.files.Run.SetDeadline(time.Time{})
}

// destroy kills the child (by pidfd, or through the zygote before it has
// one; the sandbox has killed its cgroup), waits for its exit, removes its
// cgroup and frees its slot. Safe on a half-built child and more than once.
func (c *zygoteChild) destroy() {
	c.destroyOnce.Do(func() {
		forked := c.zpid > 0
		switch {
		case c.pidfd >= 0:
			_ = unix.PidfdSendSignal(c.pidfd, unix.SIGKILL, nil, 0)
		case forked:
			c.z.conn.Kill(c.zpid)
		}
		exited := !forked
		if forked {
			select {
			case <-c.exited:
				exited = true
			case <-time.After(zygoteExitWait):
				c.z.log.Warn("zygote child did not exit; its slot stays taken", "run", c.name, "pid", c.hpid)
			}
		}
		kept := false
		if c.cg != nil {
			if err := c.cg.Delete(); err != nil {
				c.z.log.Warn("remove zygote child cgroup", "run", c.name, "err", err)
				kept = true
			}
		}
		if c.files != nil {
			c.files.Close()
		}
		if c.pidfd >= 0 {
			unix.Close(c.pidfd)
		}
		if kept {
			c.live.Drop() // the next engine's Recover removes the cgroup
		} else {
			c.live.Release()
		}
		if c.slot >= 0 && exited {
			c.z.mu.Lock()
			c.z.free = append(c.z.free, c.slot)
			c.z.mu.Unlock()
		}
	})
}
