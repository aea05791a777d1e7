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

// The CPU weights of a background cgroup (Limits.Background) and of every
// other one (the kernel's defaults).
const (
	backgroundShares = 2 // v1 cpu.shares: the least the kernel takes
	defaultShares    = 1024
	backgroundWeight = 1 // v2 cpu.weight
	defaultWeight    = 100
)

// Foreground gives a Background cgroup the default CPU weight again, as
// every other sandbox has (a pooled sandbox taken by a run). Without the
// cpu controller there is no weight to restore.
func (c *Cgroup) Foreground() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	leaf, file, val := c.hier[0], "cpu.weight", strconv.Itoa(defaultWeight)
	if !c.v2 {
		d, ok := c.dir["cpu"]
		if !ok {
			return nil
		}
		leaf, file, val = d, "cpu.shares", strconv.Itoa(defaultShares)
	} else if !fileExists(leaf, file) {
		return nil
	}
	if err := writeFile(leaf, file, val); err != nil {
		return fmt.Errorf("cgroup %s: foreground: %w", c.id, err)
	}
	return nil
}
