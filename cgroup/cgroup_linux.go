package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

const (
	cfsPeriodUs = 100000
	killTimeout = 2 * time.Second
	// freezeTimeout bounds Freeze (a session's pause): a loaded machine
	// may take seconds to stop every process of a cgroup.
	freezeTimeout = 10 * time.Second
)

// Stats is the resource usage of a sandbox cgroup.
type Stats struct {
	MemoryPeakBytes int64 // v1 memory.max_usage_in_bytes, v2 memory.peak
	MemoryBytes     int64 // now: v1 memory.usage_in_bytes, v2 memory.current
	CPUUsage        time.Duration
	UserCPU         time.Duration
	SystemCPU       time.Duration
	OOMKills        int64 // v1 memory.oom_control oom_kill, v2 memory.events oom_kill
	PidsCurrent     int64
	PidsLimitHit    bool // pids.events max > 0
}

// Cgroup is one sandbox's cgroup.
type Cgroup struct {
	id   string
	v2   bool
	dir  map[string]*dir // controller (v2: "") -> leaf directory
	hier []*dir          // distinct leaf directories

	// mu guards the leaves' fds: a file operation holds it for reading,
	// Delete, which closes them, for writing, so that no operation ever
	// goes through an fd number that was closed and reused.
	mu      sync.RWMutex
	deleted bool
}

// ID returns the sandbox id the cgroup was created for.
func (c *Cgroup) ID() string { return c.id }

// CloneFD returns an O_PATH directory fd of the v2 leaf, for
// syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd} (CLONE_INTO_CGROUP).
// It is -1 on v1 and after Delete.
func (c *Cgroup) CloneFD() int {
	if !c.v2 {
		return -1
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.hier[0].fd
}

// Add moves pid into the cgroup: on v1 into every hierarchy used, one after
// another; on v2 through cgroup.procs (for when CloneFD is not used).
//
// On v1 a move waits for an RCU grace period unless another move ran moments
// before: 9-12 ms after an idle spell, 0.1-0.4 ms back to back. Only the
// first of the five writes waits, so writing them in parallel (AddParallel)
// saves nothing (BenchmarkCreateAddDelete). Overlap Add with the child's own
// setup to hide it.
func (c *Cgroup) Add(pid int) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v := strconv.Itoa(pid)
	for _, d := range c.hier {
		if err := writeFile(d, "cgroup.procs", v); err != nil {
			return fmt.Errorf("cgroup %s: add pid %d: %w", c.id, pid, err)
		}
	}
	return nil
}

// Rewrite writes pid, which must already be in the cgroup, to the first
// hierarchy's cgroup.procs again: a migration that moves nothing. It still
// takes the kernel's migration lock, so after an idle spell it starts the
// RCU grace period that the next migration on the host would wait for
// (9-12 ms here). Call it shortly before an Add that cannot start yet (the
// pid to move does not exist) to overlap that wait with other work.
func (c *Cgroup) Rewrite(pid int) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if err := writeFile(c.hier[0], "cgroup.procs", strconv.Itoa(pid)); err != nil {
		return fmt.Errorf("cgroup %s: rewrite pid %d: %w", c.id, pid, err)
	}
	return nil
}

// AddParallel is Add with the v1 hierarchies written concurrently; it is
// kept to measure against Add.
func (c *Cgroup) AddParallel(pid int) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v := strconv.Itoa(pid)
	errs := make([]error, len(c.hier))
	var wg sync.WaitGroup
	for i, d := range c.hier {
		wg.Go(func() { errs[i] = writeFile(d, "cgroup.procs", v) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cgroup %s: add pid %d: %w", c.id, pid, err)
	}
	return nil
}

// Pids returns the processes in the cgroup (the union over hierarchies on v1),
// sorted.
func (c *Cgroup) Pids() ([]int, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.pids()
}

func (c *Cgroup) pids() ([]int, error) {
	var all []int
	for _, d := range c.hier {
		pids, err := readPids(d)
		if err != nil {
			if isNotExist(err) {
				continue
			}
			return nil, fmt.Errorf("cgroup %s: %w", c.id, err)
		}
		all = append(all, pids...)
	}
	slices.Sort(all)
	return slices.Compact(all), nil
}

// Stats reads the cgroup's resource usage. Counters whose controller is not
// in use read as zero.
func (c *Cgroup) Stats() (Stats, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var s Stats
	var err error
	if c.v2 {
		err = c.statsV2(&s)
	} else {
		err = c.statsV1(&s)
	}
	if err != nil {
		return s, fmt.Errorf("cgroup %s stats: %w", c.id, err)
	}
	return s, nil
}

// Kill kills every process in the cgroup and waits, up to about two
// seconds, until it is empty. On v2 it writes cgroup.kill; on v1 (or a v2
// kernel without cgroup.kill) it freezes the cgroup, SIGKILLs every pid in
// it, thaws it, and repeats until it is empty.
func (c *Cgroup) Kill() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	deadline := time.Now().Add(killTimeout)
	if c.v2 {
		err := writeFile(c.hier[0], "cgroup.kill", "1")
		switch {
		case err == nil:
			if c.waitEmpty(deadline) {
				return nil
			}
			return fmt.Errorf("cgroup %s: %w", c.id, ErrKillTimeout)
		case isNotExist(err) && !c.exists():
			return nil
		case !isNotExist(err):
			return fmt.Errorf("cgroup %s: kill: %w", c.id, err)
		}
		// No cgroup.kill (kernel < 5.14): freeze and kill.
	}
	return c.killFrozen(deadline)
}

// killFrozen freezes the cgroup, SIGKILLs every pid in it, thaws it, and
// repeats until it is empty or the deadline passes.
func (c *Cgroup) killFrozen(deadline time.Time) error {
	self := unix.Getpid()
	for {
		pids, err := c.pids()
		if err != nil {
			return fmt.Errorf("cgroup %s: kill: %w", c.id, err)
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: %d processes left: %w", c.id, len(pids), ErrKillTimeout)
		}
		frozen := c.freeze(true, deadline)
		// While frozen no process can fork or exit, so the pids read now
		// are the live members and cannot be reused under us.
		if frozen {
			if pids, err = c.pids(); err != nil {
				c.freeze(false, deadline)
				return fmt.Errorf("cgroup %s: kill: %w", c.id, err)
			}
		}
		for _, pid := range pids {
			// A thread of this process steps into a v1 cgroup to clone
			// its init there (EnterThread) and lists the process in
			// cgroup.procs meanwhile; never kill ourselves.
			if pid != self {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		// Thawed whether or not the freeze completed: a freeze that had
		// not reached FROZEN by the deadline (a loaded machine) still
		// completes later, and a cgroup left so holds its processes, their
		// SIGKILL pending, for ever (a daemon hung waiting for a pool
		// runner to exit, seen under two busy loops).
		c.freeze(false, deadline)
		if c.waitEmpty(earlier(deadline, time.Now().Add(100*time.Millisecond))) {
			return nil
		}
	}
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Freeze stops every process of the cgroup (cgroup.freeze on v2, the v1
// freezer) and waits, up to about two seconds, until the kernel reports it
// frozen: from then on none of them runs, forks or exits. ErrController:
// a v1 hierarchy without the freezer.
func (c *Cgroup) Freeze() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.v2 {
		if _, ok := c.dir["freezer"]; !ok {
			return fmt.Errorf("cgroup %s: freezer: %w", c.id, ErrController)
		}
	}
	if !c.freeze(true, time.Now().Add(freezeTimeout)) {
		c.freeze(false, time.Now())
		return fmt.Errorf("cgroup %s: %w", c.id, ErrFreezeTimeout)
	}
	return nil
}

// Thaw lets the processes of a frozen cgroup run again.
func (c *Cgroup) Thaw() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	leaf, file, val := c.hier[0], "cgroup.freeze", "0"
	if !c.v2 {
		d, ok := c.dir["freezer"]
		if !ok {
			return fmt.Errorf("cgroup %s: freezer: %w", c.id, ErrController)
		}
		leaf, file, val = d, "freezer.state", "THAWED"
	}
	if err := writeFile(leaf, file, val); err != nil {
		return fmt.Errorf("cgroup %s: thaw: %w", c.id, err)
	}
	return nil
}

// freeze freezes (or thaws) the cgroup and, when freezing, waits until it
// is frozen. It reports whether the cgroup was frozen.
func (c *Cgroup) freeze(on bool, deadline time.Time) bool {
	var leaf *dir
	var file, val, check string
	if c.v2 {
		leaf, file, val = c.hier[0], "cgroup.freeze", "0"
		if on {
			val = "1"
		}
	} else {
		d, ok := c.dir["freezer"]
		if !ok {
			return false
		}
		leaf, file, val = d, "freezer.state", "THAWED"
		if on {
			val = "FROZEN"
		}
	}
	if err := writeFile(leaf, file, val); err != nil || !on {
		return false
	}
	for i := 1; ; i++ {
		if !c.v2 {
			// A v1 freezer may stay FREEZING while processes keep
			// appearing (fork, clone) or on a slow machine: as runc does,
			// ask again each round, and now and then thaw, let the
			// stragglers run a moment and start over (v2's freezer has no
			// such flaw: it is asked once).
			if i%50 == 0 {
				_ = writeFile(leaf, file, "THAWED")
				time.Sleep(10 * time.Millisecond)
			}
			if err := writeFile(leaf, file, val); err != nil {
				return false
			}
		}
		if c.v2 {
			var a small
			ev, err := readFile(leaf, "cgroup.events", a[:0])
			if err != nil {
				return false
			}
			check = strconv.FormatInt(keyed(ev, "frozen"), 10)
			if check == "1" {
				return true
			}
		} else {
			var a small
			b, err := readFile(leaf, "freezer.state", a[:0])
			if err != nil {
				return false
			}
			if string(bytes.TrimSpace(b)) == "FROZEN" {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// waitEmpty polls until no process is left in the cgroup or the deadline
// passes.
func (c *Cgroup) waitEmpty(deadline time.Time) bool {
	wait := 100 * time.Microsecond
	for {
		pids, err := c.pids()
		if err == nil && len(pids) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
		wait = min(2*wait, 10*time.Millisecond)
	}
}

func (c *Cgroup) exists() bool {
	for _, d := range c.hier {
		var st unix.Stat_t
		if unix.Stat(d.path, &st) == nil {
			return true
		}
	}
	return false
}

// Delete removes the cgroup's directory in every hierarchy (call Kill
// first) and closes CloneFD. It is idempotent.
func (c *Cgroup) Delete() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted {
		return nil
	}
	var errs []error
	for _, d := range c.hier {
		if err := rmdirRetry(d.path); err != nil {
			errs = append(errs, fmt.Errorf("cgroup %s: remove %s: %w", c.id, d.path, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, d := range c.hier {
		d.closeDir()
	}
	c.deleted = true
	return nil
}

// rmdirRetry removes a cgroup directory, retrying for a short while on
// EBUSY: a cgroup whose last process just died can stay busy until the
// kernel has finished tearing the process down.
func rmdirRetry(d string) error {
	deadline := time.Now().Add(time.Second)
	for {
		err := unix.Rmdir(d)
		if err == nil || err == unix.ENOENT {
			return nil
		}
		if err != unix.EBUSY || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}
