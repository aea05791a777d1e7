package cgroup

import (
	"fmt"
	"strconv"
	"time"
)

func (c *Cgroup) limitV1(l Limits) error {
	if d, ok := c.dir["memory"]; ok {
		// Swap is off for sandboxes whether or not memory is limited.
		if err := writeFile(d, "memory.swappiness", "0"); err != nil && !isNotExist(err) {
			return err
		}
		if l.MemoryBytes > 0 {
			v := strconv.FormatInt(l.MemoryBytes, 10)
			if err := writeFile(d, "memory.limit_in_bytes", v); err != nil {
				return err
			}
			// memsw exists only with swap accounting; mem+swap = mem
			// means no swap.
			if err := writeFile(d, "memory.memsw.limit_in_bytes", v); err != nil && !isNotExist(err) {
				return err
			}
		}
	} else if l.MemoryBytes > 0 {
		return fmt.Errorf("memory limit: v1 memory: %w", ErrController)
	}
	if l.Pids > 0 {
		d, ok := c.dir["pids"]
		if !ok {
			return fmt.Errorf("pids limit: v1 pids: %w", ErrController)
		}
		if err := writeFile(d, "pids.max", strconv.FormatInt(l.Pids, 10)); err != nil {
			return err
		}
	}
	if d, ok := c.dir["cpu"]; ok && l.Background { // a weight, not a limit: none without the controller
		if err := writeFile(d, "cpu.shares", strconv.Itoa(backgroundShares)); err != nil {
			return err
		}
	}
	if l.CPUs > 0 {
		d, ok := c.dir["cpu"]
		if !ok {
			return fmt.Errorf("cpu limit: v1 cpu: %w", ErrController)
		}
		if err := writeFile(d, "cpu.cfs_period_us", strconv.Itoa(cfsPeriodUs)); err != nil {
			return err
		}
		if err := writeFile(d, "cpu.cfs_quota_us", strconv.FormatInt(cpuQuota(l.CPUs), 10)); err != nil {
			return err
		}
	}
	return nil
}

// cpuQuota is the CFS quota in µs per 100 ms period for a CPU limit; the
// kernel's minimum is 1 ms.
func cpuQuota(cpus float64) int64 {
	return max(int64(cpus*cfsPeriodUs), 1000)
}

func (c *Cgroup) statsV1(s *Stats) error {
	if d, ok := c.dir["memory"]; ok {
		v, err := readInt(d, "memory.max_usage_in_bytes")
		if err != nil {
			return err
		}
		s.MemoryPeakBytes = v
		if s.MemoryBytes, err = readInt(d, "memory.usage_in_bytes"); err != nil {
			return err
		}
		var a small
		oc, err := readFile(d, "memory.oom_control", a[:0])
		if err != nil {
			return err
		}
		s.OOMKills = keyed(oc, "oom_kill")
	}
	if d, ok := c.dir["cpuacct"]; ok {
		v, err := readInt(d, "cpuacct.usage")
		if err != nil {
			return err
		}
		s.CPUUsage = time.Duration(v)
		// cpuacct.stat splits time in ticks; cpuacct.usage is exact. Split
		// the exact figure by the ticks' ratio, as v2's cpu.stat does.
		var a small
		st, err := readFile(d, "cpuacct.stat", a[:0])
		if err != nil {
			return err
		}
		if u, sy := keyed(st, "user"), keyed(st, "system"); u+sy > 0 {
			s.UserCPU = time.Duration(float64(v) * float64(u) / float64(u+sy))
			s.SystemCPU = s.CPUUsage - s.UserCPU
		}
	}
	if d, ok := c.dir["pids"]; ok {
		v, err := readInt(d, "pids.current")
		if err != nil {
			return err
		}
		s.PidsCurrent = v
		var a small
		ev, err := readFile(d, "pids.events", a[:0])
		if err != nil {
			return err
		}
		s.PidsLimitHit = keyed(ev, "max") > 0
	}
	return nil
}
