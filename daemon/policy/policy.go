// Package policy is what a request may ask for: the defaults, maxima and
// profiles of the daemon, and the validation that turns a wire request into
// a Job the engine can run. It knows nothing of transports.
package policy

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/limits"
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
	// CommandOutputBytes caps each command's output per stream in a
	// session with processes (E2B's commands), as output_bytes caps a
	// run's (default procs.DefaultOutputBytes, 64 MiB). Past it the
	// command's group is killed and its end says output_limit.
	CommandOutputBytes int64
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

// DefaultMaxLimits are the maxima a request may ask for unless configured
// (the limits table's maxima).
func DefaultMaxLimits() container.Limits { return limits.Maxima() }

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
	if r, got, mx, above := limits.Above(d, m); above {
		return nil, fmt.Errorf("policy: the default %s %s is above the maximum %s; raise the maximum", r.Key, r.Format(got), r.Format(mx))
	}
	for _, l := range []container.Limits{d, m} {
		if key, err := limits.CheckSet(l); err != nil {
			return nil, fmt.Errorf("policy: %s limit: %v", key, err)
		}
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
		if field, err := limits.CheckWire(pr.Limits); err != nil {
			return nil, fmt.Errorf("policy: profile %q: %s: %v", pr.Name, field, err)
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
	if err := CheckLimits(&req); err != nil {
		return container.Limits{}, err
	}
	lim := limits.FromWire(req)
	suffix := ""
	if profile != "" {
		pr, ok := pol.profiles[profile]
		if !ok {
			return container.Limits{}, errdefs.Field("profile", "%q is not a profile of this daemon; it has %s",
				profile, strings.Join(pol.names, ", "))
		}
		lim = lim.Or(limits.FromWire(pr.Limits))
		suffix = fmt.Sprintf(" (request limits over profile %q)", profile)
	}
	lim = lim.Or(pol.Defaults)
	if r, got, mx, above := limits.Above(lim, pol.Max); above {
		return container.Limits{}, errdefs.Field("limits."+r.Field, "%v is above the daemon's maximum %v%s",
			strconv.FormatFloat(got, 'f', -1, 64), strconv.FormatFloat(mx, 'f', -1, 64), suffix)
	}
	return lim, nil
}

// CheckLimits refuses what no sandbox could run with (limits.CheckWire:
// negative, not a number, below the minimum), naming the field, before any
// sandbox work.
func CheckLimits(l *agentapi.Limits) error {
	if l == nil {
		return nil
	}
	if field, err := limits.CheckWire(*l); err != nil {
		return errdefs.Field(field, "%v", err)
	}
	return nil
}

// Profiles lists the profiles with their limits resolved over the
// defaults, sorted by name.
func (pol *Rules) Profiles() []agentapi.Profile {
	out := make([]agentapi.Profile, 0, len(pol.names))
	for _, n := range pol.names {
		pr := pol.profiles[n]
		pr.Limits = limits.ToWire(limits.FromWire(pr.Limits).Or(pol.Defaults))
		out = append(out, pr)
	}
	return out
}
