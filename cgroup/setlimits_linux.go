package cgroup

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// SetLimits changes the limits of a live cgroup (a sandbox prepared ahead
// of its run gets the run's limits this way). Zero fields are left as they
// are. On v1 the memory+swap limit must never drop below the memory limit,
// so the two are written in the order that keeps that true.
func (c *Cgroup) SetLimits(l Limits) error {
	if l.MemoryBytes < 0 || l.Pids < 0 || l.CPUs < 0 {
		return fmt.Errorf("cgroup %s: negative limit %+v", c.id, l)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.v2 {
		return c.limitV2(l)
	}
	if d, ok := c.dir["memory"]; ok && l.MemoryBytes > 0 {
		v := strconv.FormatInt(l.MemoryBytes, 10)
		err := writeFile(d, "memory.memsw.limit_in_bytes", v)
		switch {
		case err == nil || isNotExist(err):
			// Raising (or no swap accounting): memsw first, then memory.
			if err := writeFile(d, "memory.limit_in_bytes", v); err != nil {
				return fmt.Errorf("cgroup %s: %w", c.id, err)
			}
		case errors.Is(err, unix.EINVAL):
			// Lowering: memory first, then memsw.
			if err := writeFile(d, "memory.limit_in_bytes", v); err != nil {
				return fmt.Errorf("cgroup %s: %w", c.id, err)
			}
			if err := writeFile(d, "memory.memsw.limit_in_bytes", v); err != nil {
				return fmt.Errorf("cgroup %s: %w", c.id, err)
			}
		default:
			return fmt.Errorf("cgroup %s: %w", c.id, err)
		}
		l.MemoryBytes = 0 // done
	}
	return c.limitV1(l)
}
