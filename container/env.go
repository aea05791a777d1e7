package container

import (
	"fmt"
	"strings"
)

// basePath is the sandbox's PATH unless the spec sets its own.
const basePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// buildEnv returns the clean environment of a run: a fixed base (nothing of
// the engine's own environment) with the spec's pairs on top. Numeric
// libraries get as many threads as the CPU limit allows.
func buildEnv(extra []string, cpus float64) ([]string, error) {
	n := fmt.Sprint(threads(cpus))
	env := []string{
		"PATH=" + basePath,
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
		if err := ValidEnvKey(k); !ok || err != nil {
			return nil, fmt.Errorf("%w: env %q: want KEY=VALUE with KEY of letters, digits and _", ErrInvalidSpec, kv)
		}
		if strings.IndexByte(kv, 0) >= 0 {
			return nil, fmt.Errorf("%w: env %s contains a NUL byte", ErrInvalidSpec, k)
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

// ValidEnvKey reports whether k is a usable environment variable name.
func ValidEnvKey(k string) error {
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
