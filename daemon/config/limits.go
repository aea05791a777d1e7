package config

import (
	"cmp"
	"runtime"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
)

// DefaultMaxLimits are the maxima a request may ask for unless configured
// ([max_limits]).
func DefaultMaxLimits() container.Limits {
	return container.Limits{
		Timeout:     10 * time.Minute,
		MemoryBytes: 8 << 30,
		Pids:        4096,
		CPUs:        float64(runtime.NumCPU()),
		DiskBytes:   8 << 30,
		OutputBytes: 64 << 20,
	}
}

// Limits returns the effective default and maximum limits: [default_limits]
// over container.DefaultLimits, [max_limits] over DefaultMaxLimits.
func (cfg Config) Limits() (defaults, maxima container.Limits) {
	return engineLimits(cfg.DefaultLimits).WithDefaults(), orLimits(engineLimits(cfg.MaxLimits), DefaultMaxLimits())
}

// orLimits returns l with each zero field taken from base.
func orLimits(l, base container.Limits) container.Limits {
	l.Timeout = cmp.Or(l.Timeout, base.Timeout)
	l.MemoryBytes = cmp.Or(l.MemoryBytes, base.MemoryBytes)
	l.Pids = cmp.Or(l.Pids, base.Pids)
	l.CPUs = cmp.Or(l.CPUs, base.CPUs)
	l.DiskBytes = cmp.Or(l.DiskBytes, base.DiskBytes)
	l.OutputBytes = cmp.Or(l.OutputBytes, base.OutputBytes)
	return l
}

// engineLimits converts wire limits (as the file writes them) to engine
// limits; zero fields stay zero.
func engineLimits(l agentapi.Limits) container.Limits {
	return container.Limits{
		Timeout:     time.Duration(l.TimeoutMs) * time.Millisecond,
		MemoryBytes: l.MemoryBytes,
		Pids:        l.Pids,
		CPUs:        l.CPUs,
		DiskBytes:   l.DiskBytes,
		OutputBytes: l.OutputBytes,
	}
}
