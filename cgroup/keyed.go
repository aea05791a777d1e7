package cgroup

import (
	"bytes"
	"strconv"
)

// keyed returns the value of key in a flat keyed cgroup file ("key value"
// per line), as memory.events, cpu.stat, pids.events, cpuacct.stat and
// memory.oom_control are; 0 when the key is missing or its value does not
// parse.
func keyed(b []byte, key string) int64 {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		k, v, ok := bytes.Cut(bytes.TrimSpace(line), []byte{' '})
		if !ok || string(k) != key {
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil {
			return 0
		}
		return n
	}
	return 0
}
