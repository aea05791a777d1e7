package cgroup

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
)

// parseKeyed parses a flat keyed cgroup file ("key value" per line), as
// memory.events, cpu.stat, pids.events, cpuacct.stat and memory.oom_control
// are. Lines that do not parse are skipped.
func parseKeyed(b []byte) map[string]int64 {
	out := make(map[string]int64)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		out[k] = n
	}
	return out
}
