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
// Numeric libraries get threads threads.
func Build(extra []string, threads int) ([]string, error) {
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
