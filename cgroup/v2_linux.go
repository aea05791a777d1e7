package cgroup

import (
	"fmt"
	"strconv"
	"time"
)

func (c *Cgroup) limitV2(l Limits) error {
	d := c.hier[0]
	has := func(file string) bool { return fileExists(d, file) }
	if has("memory.max") {
		if err := writeFile(d, "memory.swap.max", "0"); err != nil && !isNotExist(err) {
			return err
		}
		if err := writeFile(d, "memory.oom.group", "1"); err != nil {
			return err
		}
		if l.MemoryBytes > 0 {
			if err := writeFile(d, "memory.max", strconv.FormatInt(l.MemoryBytes, 10)); err != nil {
				return err
			}
		}
	} else if l.MemoryBytes > 0 {
		return fmt.Errorf("memory limit: v2 memory: %w", ErrController)
	}
	if l.Pids > 0 {
		if !has("pids.max") {
			return fmt.Errorf("pids limit: v2 pids: %w", ErrController)
		}
		if err := writeFile(d, "pids.max", strconv.FormatInt(l.Pids, 10)); err != nil {
			return err
		}
	}
	if l.Background && has("cpu.weight") { // a weight, not a limit: none without the controller
		if err := writeFile(d, "cpu.weight", strconv.Itoa(backgroundWeight)); err != nil {
			return err
		}
	}
	if l.CPUs > 0 {
		if !has("cpu.max") {
			return fmt.Errorf("cpu limit: v2 cpu: %w", ErrController)
		}
		v := strconv.FormatInt(cpuQuota(l.CPUs), 10) + " " + strconv.Itoa(cfsPeriodUs)
		if err := writeFile(d, "cpu.max", v); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cgroup) statsV2(s *Stats) error {
	d := c.hier[0]
	if v, err := readInt(d, "memory.peak"); err == nil {
		s.MemoryPeakBytes = v
	} else if !isNotExist(err) {
		return err
	}
	if v, err := readInt(d, "memory.current"); err == nil {
		s.MemoryBytes = v
	} else if !isNotExist(err) {
		return err
	}
	var a small
	if ev, err := readFile(d, "memory.events", a[:0]); err == nil {
		s.OOMKills = keyed(ev, "oom_kill")
	} else if !isNotExist(err) {
		return err
	}
	cs, err := readFile(d, "cpu.stat", a[:0])
	if err != nil {
		return err
	}
	s.CPUUsage = time.Duration(keyed(cs, "usage_usec")) * time.Microsecond
	s.UserCPU = time.Duration(keyed(cs, "user_usec")) * time.Microsecond
	s.SystemCPU = time.Duration(keyed(cs, "system_usec")) * time.Microsecond
	if v, err := readInt(d, "pids.current"); err == nil {
		s.PidsCurrent = v
	} else if !isNotExist(err) {
		return err
	}
	if ev, err := readFile(d, "pids.events", a[:0]); err == nil {
		s.PidsLimitHit = keyed(ev, "max") > 0
	} else if !isNotExist(err) {
		return err
	}
	return nil
}
