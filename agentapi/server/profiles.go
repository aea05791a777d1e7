package server

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
)

// Policy is the part of the configuration that Reconfigure changes while
// the server runs: what a request's absent fields become and the most it may
// ask for. Zero fields take the same defaults as in Config.
type Policy struct {
	DefaultRootfs string
	DefaultLimits container.Limits
	MaxLimits     container.Limits
	Profiles      []agentapi.Profile // nil: agentapi.BuiltinProfiles()
}

// policy is a checked Policy, swapped atomically by Reconfigure.
type policy struct {
	defaultRootfs string
	defaults, max container.Limits
	profiles      map[string]agentapi.Profile
	names         []string // sorted
}

// newPolicy fills p's zero fields and checks it: defaults within the
// maxima, profile names unique and well-formed, profile limits not negative.
// A profile above the maxima is allowed here and refused per run, so that a
// built-in profile does not stop a daemon on a small host from starting.
func newPolicy(p Policy) (*policy, error) {
	c := Config{DefaultRootfs: p.DefaultRootfs, DefaultLimits: p.DefaultLimits, MaxLimits: p.MaxLimits}.withDefaults()
	d, m := c.DefaultLimits, c.MaxLimits
	if d.Timeout > m.Timeout || d.MemoryBytes > m.MemoryBytes || d.Pids > m.Pids || d.CPUs > m.CPUs ||
		d.DiskBytes > m.DiskBytes || d.OutputBytes > m.OutputBytes {
		return nil, fmt.Errorf("server: default limits %+v exceed the maxima %+v; raise the maxima", d, m)
	}
	profiles := p.Profiles
	if profiles == nil {
		profiles = agentapi.BuiltinProfiles()
	}
	pol := &policy{defaultRootfs: c.DefaultRootfs, defaults: d, max: m, profiles: make(map[string]agentapi.Profile, len(profiles))}
	for _, pr := range profiles {
		if err := ValidProfileName(pr.Name); err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		if _, dup := pol.profiles[pr.Name]; dup {
			return nil, fmt.Errorf("server: profile %q defined twice", pr.Name)
		}
		l := pr.Limits
		if l.TimeoutMs < 0 || l.MemoryBytes < 0 || l.Pids < 0 || l.DiskBytes < 0 || l.OutputBytes < 0 ||
			l.CPUs < 0 || math.IsNaN(l.CPUs) || math.IsInf(l.CPUs, 0) {
			return nil, fmt.Errorf("server: profile %q has a negative or invalid limit: %+v", pr.Name, l)
		}
		pol.profiles[pr.Name] = pr
		pol.names = append(pol.names, pr.Name)
	}
	sort.Strings(pol.names)
	return pol, nil
}

// ValidProfileName checks a profile name: 1 to 64 of [a-z0-9_-].
func ValidProfileName(name string) error {
	if name == "" || len(name) > 64 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
		return fmt.Errorf("profile name %q: use 1 to 64 of a-z, 0-9, _ and -", name)
	}
	return nil
}

// Reconfigure checks p and makes it apply to the requests that arrive from
// now on; runs already admitted keep their limits. On error nothing changes.
func (s *Server) Reconfigure(p Policy) error {
	pol, err := newPolicy(p)
	if err != nil {
		return err
	}
	s.pol.Store(pol)
	return nil
}

// limitsFor resolves a request's limits: the fields l sets, then those of
// the named profile, then the defaults. A value above the maxima is refused,
// whether it came from the request or from the profile.
func (s *Server) limitsFor(profile string, l *agentapi.Limits) (container.Limits, error) {
	pol := s.pol.Load()
	var req agentapi.Limits
	if l != nil {
		req = *l
	}
	if profile == "" {
		return pol.limits(&req)
	}
	pr, ok := pol.profiles[profile]
	if !ok {
		return container.Limits{}, fieldErr("profile", "%q is not a profile of this daemon; it has %s",
			profile, strings.Join(pol.names, ", "))
	}
	merged := overlay(req, pr.Limits)
	lim, err := pol.limits(&merged)
	if fe, ok := err.(*FieldError); ok {
		return lim, fieldErr(fe.Field, "%s (request limits over profile %q)", fe.Msg, profile)
	}
	return lim, err
}

// overlay returns l with its zero fields taken from base.
func overlay(l, base agentapi.Limits) agentapi.Limits {
	if l.TimeoutMs == 0 {
		l.TimeoutMs = base.TimeoutMs
	}
	if l.MemoryBytes == 0 {
		l.MemoryBytes = base.MemoryBytes
	}
	if l.Pids == 0 {
		l.Pids = base.Pids
	}
	if l.CPUs == 0 {
		l.CPUs = base.CPUs
	}
	if l.DiskBytes == 0 {
		l.DiskBytes = base.DiskBytes
	}
	if l.OutputBytes == 0 {
		l.OutputBytes = base.OutputBytes
	}
	return l
}

// infoProfiles lists the profiles with their limits resolved over the
// defaults, sorted by name.
func (pol *policy) infoProfiles() []agentapi.Profile {
	out := make([]agentapi.Profile, 0, len(pol.names))
	d := wireLimits(pol.defaults)
	for _, n := range pol.names {
		pr := pol.profiles[n]
		pr.Limits = overlay(pr.Limits, d)
		out = append(out, pr)
	}
	return out
}
