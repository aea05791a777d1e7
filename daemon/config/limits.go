package config

import (
	"github.com/nsbox/nsbox/agentapi/limits"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/daemon/policy"
)

// Limits returns the effective default and maximum limits: [default_limits]
// over container.DefaultLimits, [max_limits] over DefaultMaxLimits.
func (cfg Config) Limits() (defaults, maxima container.Limits) {
	return limits.FromWire(cfg.DefaultLimits).WithDefaults(), limits.FromWire(cfg.MaxLimits).Or(policy.DefaultMaxLimits())
}
