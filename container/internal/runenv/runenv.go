// Package runenv builds the environment of a run: a fixed base, nothing of
// the engine's own, with the caller's pairs on top.
package runenv

import (
	"fmt"
	"strconv"
	"strings"
)

// BasePath is the sandbox's PATH unless the spec sets its own.
const BasePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Build returns the clean environment of a run: a fixed base (nothing of
// the engine's own environment) with extra's KEY=VALUE pairs on top.
// Numeric libraries get threads threads, and Node.js a V8 heap limit of the
// run's memory limit (memoryBytes).
//
// Node 18 sizes V8's heap from the host's RAM, not the cgroup (4 GiB on a
// 24 GiB host whatever the limit), so V8 collects garbage lazily and is
// killed by the cgroup first: a program churning through arrays with 10 MiB
// live was OOM-killed at 96 MiB without a heap limit and peaked at 66 MiB
// with one (at 512 MiB: 109 -> 70 MiB peak). The limit is the whole memory
// limit, not a share of it: node's own ~45 MiB outside the heap then still
// makes a heap bomb hit the cgroup's limit first, so it ends with the oom
// verdict as in Python, not with V8's fatal "heap out of memory" (a signal
// death), which a 75% share gave.
func Build(extra []string, threads int, memoryBytes int64) ([]string, error) {
	n := strconv.Itoa(threads)
	env := []string{
		"PATH=" + BasePath,
		"HOME=/workspace",
		"USER=sandbox",
		"LOGNAME=sandbox",
		"LANG=C.UTF-8",
		"TMPDIR=/tmp",
		"MPLBACKEND=Agg",
		"PYTHONUNBUFFERED=1",
		"PYTHONDONTWRITEBYTECODE=1",
		"OPENBLAS_NUM_THREADS=" + n,
		"OMP_NUM_THREADS=" + n,
		"MKL_NUM_THREADS=" + n,
		"NUMEXPR_NUM_THREADS=" + n,
		"NODE_OPTIONS=--max-old-space-size=" + strconv.FormatInt(max(1, memoryBytes>>20), 10),
	}
	index := make(map[string]int, len(env))
	for i, kv := range env {
		index[kv[:strings.IndexByte(kv, '=')]] = i
	}
	for _, kv := range extra {
		k, _, ok := strings.Cut(kv, "=")
		if err := ValidKey(k); !ok || err != nil {
			return nil, fmt.Errorf("env %q: want KEY=VALUE with KEY of letters, digits and _", kv)
		}
		if strings.IndexByte(kv, 0) >= 0 {
			return nil, fmt.Errorf("env %s contains a NUL byte", k)
		}
		if i, dup := index[k]; dup {
			env[i] = kv
			continue
		}
		index[k] = len(env)
		env = append(env, kv)
	}
	return env, nil
}

// ValidKey reports whether k is a usable environment variable name.
func ValidKey(k string) error {
	if k == "" {
		return fmt.Errorf("empty environment variable name")
	}
	for i, c := range k {
		ok := c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (i > 0 && c >= '0' && c <= '9')
		if !ok {
			return fmt.Errorf("environment variable name %q: only letters, digits and _ (not first)", k)
		}
	}
	return nil
}
