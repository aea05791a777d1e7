package config

import (
	"fmt"
	"os/user"
	"strconv"
	"time"

	"github.com/nsbox/nsbox/agentapi/limits"
	"github.com/nsbox/nsbox/daemon/config/internal/tomlval"
	"github.com/nsbox/nsbox/daemon/policy"

	"github.com/pelletier/go-toml/v2/unstable"
)

// maxSessions bounds sessions.max: each live session is a sandbox with its
// own interpreter, far more than a host holds long before this.
const maxSessions = 4096

// DefaultCommandOutputBytes is [sessions] command_output unless
// configured: the output row's maximum, what a run may ask for
// (procs.DefaultOutputBytes).
const DefaultCommandOutputBytes = 64 << 20

// maxCommandOutput bounds [sessions] command_output.
const maxCommandOutput = 1 << 30

// Sessions is [sessions]: how many Python sessions may live at once and how
// long. All three apply live on reload, to sessions created afterwards.
type Sessions = policy.Sessions

func defaultSessions() Sessions {
	return Sessions{Max: 16, IdleTimeout: 15 * time.Minute, MaxLifetime: 24 * time.Hour, IdleAction: policy.IdleEnd, ParkMaxBytes: policy.DefaultParkMaxBytes, ParkRetention: policy.DefaultParkRetention, CommandOutputBytes: DefaultCommandOutputBytes}
}

// setSessionsKey stores a key of [sessions]; check bounds the values.
func (cfg *Config) setSessionsKey(key string, v *unstable.Node) error {
	s := &cfg.Sessions
	switch key {
	case "max":
		n, err := tomlval.IntIn(v, 1, maxSessions, "")
		if err != nil {
			return err
		}
		s.Max = int(n)
	case "idle_timeout", "max_lifetime", "park_retention":
		d, err := tomlval.Duration(v)
		if err != nil {
			return err
		}
		switch key {
		case "idle_timeout":
			s.IdleTimeout = d
		case "max_lifetime":
			s.MaxLifetime = d
		default:
			s.ParkRetention = d
		}
	case "idle_action":
		a, err := tomlval.String(v)
		if err != nil {
			return err
		}
		s.IdleAction = a
	case "park_max_bytes":
		n, err := tomlval.IntIn(v, 1, 1<<50, "")
		if err != nil {
			return err
		}
		s.ParkMaxBytes = n
	case "command_output":
		// A size as the limits table's output row reads it (tomlSize is
		// setLimit's reader of Bytes rows), from the row's minimum.
		n, err := tomlval.Size(v)
		if err != nil {
			return err
		}
		out, _ := limits.Lookup("output")
		if n < int64(out.Min) || n > maxCommandOutput {
			return fmt.Errorf("%s: must be between %s and %s", limits.HumanBytes(n), out.Format(out.Min), limits.HumanBytes(maxCommandOutput))
		}
		s.CommandOutputBytes = n
	case "admin_group":
		name, err := tomlval.String(v)
		if err != nil {
			return err
		}
		g, err := user.LookupGroup(name)
		if err != nil {
			return fmt.Errorf("group %q: %v; create it (groupadd %s) or name an existing group", name, err, name)
		}
		gid, err := strconv.ParseUint(g.Gid, 10, 32)
		if err != nil {
			return fmt.Errorf("group %q has gid %q: %v", name, g.Gid, err)
		}
		id := uint32(gid)
		s.AdminGID = &id
	default:
		return fmt.Errorf("unknown key; [sessions] has max, idle_timeout, idle_action, max_lifetime, park_max_bytes, park_retention, command_output and admin_group")
	}
	return nil
}

// checkSessions finds what is wrong with the session settings, wherever
// they came from.
func (cfg *Config) checkSessions(bad func(key, format string, args ...any)) {
	s := cfg.Sessions
	if s.Max < 1 || s.Max > maxSessions {
		bad("sessions.max", "%d: must be between 1 and %d", s.Max, maxSessions)
	}
	if s.IdleTimeout <= 0 {
		bad("sessions.idle_timeout", "%v: must be positive", s.IdleTimeout)
	}
	if s.MaxLifetime <= 0 {
		bad("sessions.max_lifetime", "%v: must be positive", s.MaxLifetime)
	}
	if s.ParkRetention <= 0 {
		bad("sessions.park_retention", "%v: must be positive (how long a parked session is kept)", s.ParkRetention)
	}
	if s.IdleAction != policy.IdleEnd && s.IdleAction != policy.IdlePause && s.IdleAction != policy.IdlePark {
		bad("sessions.idle_action", "%q: use %q (the idle timeout ends a session), %q (it pauses it until its lifetime ends) or %q (it parks a Python session to disk)",
			s.IdleAction, policy.IdleEnd, policy.IdlePause, policy.IdlePark)
	}
	if s.IdleTimeout > 0 && s.MaxLifetime > 0 && s.IdleTimeout > s.MaxLifetime {
		// Blame the key that was set over the other: a flag beats the file.
		key := "sessions.idle_timeout"
		if line, ok := cfg.lines["sessions.max_lifetime"]; ok && line == 0 || !cfg.isSet(key) {
			key = "sessions.max_lifetime"
		}
		bad(key, "idle timeout %v is above the maximum lifetime %v; lower sessions.idle_timeout or raise sessions.max_lifetime",
			s.IdleTimeout, s.MaxLifetime)
	}
}
