// Package policy is what a request may ask for: the defaults, maxima and
// profiles of the daemon, and the validation that turns a wire request into
// a Job the engine can run. It knows nothing of transports.
package policy

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/lang"
)

// Policy is the part of the configuration that Reconfigure changes while
// the daemon runs: what a request's absent fields become, the most it may
// ask for, and the session settings. Zero fields take the defaults below.
type Policy struct {
	DefaultRootfs string           // default "default"
	DefaultLimits container.Limits // zero fields: container.DefaultLimits()
	MaxLimits     container.Limits // zero fields: DefaultMaxLimits()
	Profiles      []agentapi.Profile
	Sessions      Sessions
	Network       Network
	// Languages are the operator's declared one-shot languages.
	Languages []lang.Declared
}

// Sessions are the session settings.
type Sessions struct {
	Max         int           // live sessions at most (default 16)
	IdleTimeout time.Duration // default idle timeout (15m)
	MaxLifetime time.Duration // a session's longest life, idle or not (24h)
	// IdleAction is what an idle timeout does by default: "end" (the
	// default) or "pause".
	IdleAction string
	// AdminGID, when set, is a group whose members see and manage every
	// session, as root does; others only their own.
	AdminGID *uint32
	// ParkMaxBytes caps what parked sessions hold on disk, all together
	// (default DefaultParkMaxBytes).
	ParkMaxBytes int64
	// ParkRetention is how long a parked session is kept (default
	// DefaultParkRetention). Its lifetime does not run while it is
	// parked: a revive gets what was left of it.
	ParkRetention time.Duration
}

// DefaultParkMaxBytes is [sessions] park_max_bytes unless configured.
const DefaultParkMaxBytes = 8 << 30

// DefaultParkRetention is [sessions] park_retention unless configured:
// 30 days, as E2B once kept paused sandboxes.
const DefaultParkRetention = 30 * 24 * time.Hour

// Idle actions: what a session's idle timeout does.
const (
	IdleEnd   = "end"
	IdlePause = "pause"
	IdlePark  = "park" // to disk (needs the daemon's state directory); Python sessions only
)

// DefaultMaxLimits are the maxima a request may ask for unless configured.
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

// Rules are a checked Policy with its defaults filled. They do not change;
// the daemon swaps whole Rules on Reconfigure.
type Rules struct {
	// RootfsDir, when set, resolves a rootfs name to its tree, where the
	// language registry looks for what a language needs (node, esbuild);
	// the daemon sets it from its rootfs store.
	RootfsDir     func(rootfs string) (string, error)
	DefaultRootfs string
	Defaults, Max container.Limits
	Sessions      Sessions
	Network       Network
	langs         *lang.Registry
	profiles      map[string]agentapi.Profile
	names         []string // sorted
}

// New fills p's zero fields and checks it: defaults within the
// maxima, profile names unique and well-formed, profile limits not negative.
// A profile above the maxima is allowed here and refused per run, so that a
// built-in profile does not stop a daemon on a small host from starting.
func New(p Policy) (*Rules, error) {
	d, m := p.DefaultLimits.WithDefaults(), p.MaxLimits.Or(DefaultMaxLimits())
	if d.Timeout > m.Timeout || d.MemoryBytes > m.MemoryBytes || d.Pids > m.Pids || d.CPUs > m.CPUs ||
		d.DiskBytes > m.DiskBytes || d.OutputBytes > m.OutputBytes {
		return nil, fmt.Errorf("policy: default limits %+v exceed the maxima %+v; raise the maxima", d, m)
	}
	profiles := p.Profiles
	if profiles == nil {
		profiles = agentapi.BuiltinProfiles()
	}
	pol := &Rules{DefaultRootfs: p.DefaultRootfs, Defaults: d, Max: m, profiles: make(map[string]agentapi.Profile, len(profiles)), Sessions: p.Sessions, Network: p.Network}
	if pol.DefaultRootfs == "" {
		pol.DefaultRootfs = "default"
	}
	if pol.Sessions.Max <= 0 {
		pol.Sessions.Max = 16
	}
	if pol.Sessions.IdleTimeout <= 0 {
		pol.Sessions.IdleTimeout = 15 * time.Minute
	}
	if pol.Sessions.MaxLifetime <= 0 {
		pol.Sessions.MaxLifetime = 24 * time.Hour
	}
	if pol.Sessions.ParkMaxBytes <= 0 {
		pol.Sessions.ParkMaxBytes = DefaultParkMaxBytes
	}
	if pol.Sessions.ParkRetention <= 0 {
		pol.Sessions.ParkRetention = DefaultParkRetention
	}
	switch pol.Sessions.IdleAction {
	case "":
		pol.Sessions.IdleAction = IdleEnd
	case IdleEnd, IdlePause, IdlePark:
	default:
		return nil, fmt.Errorf("policy: sessions idle_action %q: use %q, %q or %q", pol.Sessions.IdleAction, IdleEnd, IdlePause, IdlePark)
	}
	for _, pr := range profiles {
		if err := ValidProfileName(pr.Name); err != nil {
			return nil, fmt.Errorf("policy: %w", err)
		}
		if _, dup := pol.profiles[pr.Name]; dup {
			return nil, fmt.Errorf("policy: profile %q defined twice", pr.Name)
		}
		l := pr.Limits
		if l.TimeoutMs < 0 || l.MemoryBytes < 0 || l.Pids < 0 || l.DiskBytes < 0 || l.OutputBytes < 0 ||
			l.CPUs < 0 || math.IsNaN(l.CPUs) || math.IsInf(l.CPUs, 0) {
			return nil, fmt.Errorf("policy: profile %q has a negative or invalid limit: %+v", pr.Name, l)
		}
		pol.profiles[pr.Name] = pr
		pol.names = append(pol.names, pr.Name)
	}
	sort.Strings(pol.names)
	langs, err := lang.New(p.Languages)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	pol.langs = langs
	return pol, nil
}

// ValidProfileName checks a profile name: 1 to 64 of [a-z0-9_-].
func ValidProfileName(name string) error {
	if name == "" || len(name) > 64 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
		return fmt.Errorf("profile name %q: use 1 to 64 of a-z, 0-9, _ and -", name)
	}
	return nil
}

// limitsFor resolves a request's limits: the fields l sets, then those of
// the named profile, then the defaults. A value above the maxima is refused,
// never clamped, whether it came from the request or from the profile.
func (pol *Rules) limitsFor(profile string, l *agentapi.Limits) (container.Limits, error) {
	var req agentapi.Limits
	if l != nil {
		req = *l
	}
	if err := checkWireLimits(req); err != nil {
		return container.Limits{}, err
	}
	lim := EngineLimits(req)
	suffix := ""
	if profile != "" {
		pr, ok := pol.profiles[profile]
		if !ok {
			return container.Limits{}, errdefs.Field("profile", "%q is not a profile of this daemon; it has %s",
				profile, strings.Join(pol.names, ", "))
		}
		lim = lim.Or(EngineLimits(pr.Limits))
		suffix = fmt.Sprintf(" (request limits over profile %q)", profile)
	}
	lim = lim.Or(pol.Defaults)
	mx := pol.Max
	for _, c := range []struct {
		name     string
		got, max int64
	}{
		{"limits.timeout_ms", lim.Timeout.Milliseconds(), mx.Timeout.Milliseconds()},
		{"limits.memory_bytes", lim.MemoryBytes, mx.MemoryBytes},
		{"limits.pids", lim.Pids, mx.Pids},
		{"limits.disk_bytes", lim.DiskBytes, mx.DiskBytes},
		{"limits.output_bytes", lim.OutputBytes, mx.OutputBytes},
	} {
		if c.got > c.max {
			return container.Limits{}, errdefs.Field(c.name, "%d is above the daemon's maximum %d%s", c.got, c.max, suffix)
		}
	}
	if lim.CPUs > mx.CPUs {
		return container.Limits{}, errdefs.Field("limits.cpus", "%v is above the daemon's maximum %v%s", lim.CPUs, mx.CPUs, suffix)
	}
	return lim, nil
}

// checkWireLimits refuses negative and non-finite limits.
func checkWireLimits(l agentapi.Limits) error {
	for _, c := range []struct {
		name string
		got  int64
	}{
		{"limits.timeout_ms", l.TimeoutMs}, {"limits.memory_bytes", l.MemoryBytes}, {"limits.pids", l.Pids},
		{"limits.disk_bytes", l.DiskBytes}, {"limits.output_bytes", l.OutputBytes},
	} {
		if c.got < 0 {
			return errdefs.Field(c.name, "%d is negative", c.got)
		}
	}
	if l.CPUs < 0 || math.IsNaN(l.CPUs) || math.IsInf(l.CPUs, 0) {
		return errdefs.Field("limits.cpus", "%v is not a CPU count", l.CPUs)
	}
	return nil
}

// EngineLimits converts wire limits to the engine's; with WireLimits it is
// the one conversion pair between the two layers.
func EngineLimits(l agentapi.Limits) container.Limits {
	return container.Limits{
		Timeout:     time.Duration(l.TimeoutMs) * time.Millisecond,
		MemoryBytes: l.MemoryBytes,
		Pids:        l.Pids,
		CPUs:        l.CPUs,
		DiskBytes:   l.DiskBytes,
		OutputBytes: l.OutputBytes,
	}
}

// WireLimits converts engine limits to their wire form.
func WireLimits(l container.Limits) agentapi.Limits {
	return agentapi.Limits{
		TimeoutMs:   l.Timeout.Milliseconds(),
		MemoryBytes: l.MemoryBytes,
		Pids:        l.Pids,
		CPUs:        l.CPUs,
		DiskBytes:   l.DiskBytes,
		OutputBytes: l.OutputBytes,
	}
}

// Profiles lists the profiles with their limits resolved over the
// defaults, sorted by name.
func (pol *Rules) Profiles() []agentapi.Profile {
	out := make([]agentapi.Profile, 0, len(pol.names))
	for _, n := range pol.names {
		pr := pol.profiles[n]
		pr.Limits = WireLimits(EngineLimits(pr.Limits).Or(pol.Defaults))
		out = append(out, pr)
	}
	return out
}
