package policy

import (
	"strings"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/limits"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/daemon/egress"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/lang"
)

// SessionJob is a validated session request: what the daemon needs to
// start it, every field checked before any sandbox work.
type SessionJob struct {
	Language    string // Lang's name: python unless set
	Lang        *lang.Descriptor
	Rootfs      string
	Files       []container.File
	Env         []string
	Limits      container.Limits
	Network     *egress.Policy
	IdleAction  string // resolved: the daemon's unless set
	IdleTimeout time.Duration
	Lifetime    time.Duration
}

// ValidateSession checks a session request completely, as Validate does a
// run's: a bad value is an *errdefs.FieldError naming its field. canPark
// says whether this daemon can park (it has a state directory); processes
// whether the transport asks for a process agent beside the interpreter.
func (pol *Rules) ValidateSession(req *agentapi.SessionRequest, canPark, processes bool) (*SessionJob, error) {
	j := &SessionJob{Language: req.Language, Rootfs: req.Rootfs, IdleAction: req.IdleAction}
	if req.IdleTimeoutMs < 0 {
		return nil, errdefs.Field("idle_timeout_ms", "must not be negative")
	}
	j.IdleTimeout = time.Duration(req.IdleTimeoutMs) * time.Millisecond
	if err := pol.CheckLifetime(req.LifetimeMs); err != nil {
		return nil, err
	}
	j.Lifetime = time.Duration(req.LifetimeMs) * time.Millisecond
	if j.Rootfs == "" {
		j.Rootfs = pol.DefaultRootfs
	} else if !validRootfsName(j.Rootfs) {
		return nil, errdefs.Field("rootfs", "%q is not a rootfs name", j.Rootfs)
	}

	// The registry says what a session of the language can do.
	l := lang.Default()
	if req.Language != "" {
		if l, _ = lang.Builtin(req.Language); l == nil || !l.Sessions() {
			return nil, errdefs.Field("language", "%q: a session runs %s", req.Language, strings.Join(lang.Sessions(), ", "))
		}
	}
	j.Lang, j.Language = l, l.Name
	if processes && !l.Processes() {
		return nil, errdefs.Field("language", "processes beside the interpreter are Python sessions' (E2B sandboxes) for now")
	}
	if req.AllowedImports != nil {
		if !l.AllowedImports() {
			return nil, errdefs.Field("allowed_imports", "applies to Python sessions only (language %q)", j.Language)
		}
		if err := ValidImports(req.AllowedImports); err != nil {
			return nil, err
		}
	}

	switch j.IdleAction {
	case "":
		j.IdleAction = pol.Sessions.IdleAction
	case IdleEnd, IdlePause, IdlePark:
	default:
		return nil, errdefs.Field("idle_action", "%q: use %q, %q or %q", j.IdleAction, IdleEnd, IdlePause, IdlePark)
	}
	if j.IdleAction == IdlePark {
		switch {
		case !l.Carriable() && req.IdleAction == IdlePark:
			return nil, errdefs.Field("idle_action", "%q: fork and park are for Python sessions", j.IdleAction)
		case !l.Carriable(): // the daemon's default: a Node session ends
			j.IdleAction = IdleEnd
		case !canPark:
			return nil, errdefs.Field("idle_action", "%q: this daemon cannot park sessions (it has no state directory)", j.IdleAction)
		}
	}
	switch req.LifetimeAction {
	case "", IdleEnd:
	case IdlePark:
		switch {
		case !l.Carriable():
			return nil, errdefs.Field("lifetime_action", "%q: fork and park are for Python sessions", req.LifetimeAction)
		case !canPark:
			return nil, errdefs.Field("lifetime_action", "%q: this daemon cannot park sessions (it has no state directory)", req.LifetimeAction)
		}
	default:
		return nil, errdefs.Field("lifetime_action", "%q: use %q (the end of the lifetime ends the session) or %q (it parks it)", req.LifetimeAction, IdleEnd, IdlePark)
	}

	// What the rootfs must have, once the request itself is sound: a park
	// of a Node session is refused as such on every rootfs.
	if _, err := pol.language(l.Name, j.Rootfs); err != nil {
		return nil, err
	}
	var err error
	if j.Files, err = validFiles(req.Files); err != nil {
		return nil, err
	}
	if j.Env, err = envList(req.Env); err != nil {
		return nil, err
	}
	if j.Limits, err = pol.limitsFor("", req.Limits); err != nil {
		return nil, err
	}
	if j.Network, err = pol.network("", req.Network); err != nil {
		return nil, err
	}
	return j, nil
}

// CheckLifetime checks a session's lifetime_ms: 0 (the daemon's
// max_lifetime) up to that maximum.
func (pol *Rules) CheckLifetime(ms int64) error {
	if mx := pol.Sessions.MaxLifetime; ms < 0 || time.Duration(ms)*time.Millisecond > mx {
		return errdefs.Field("lifetime_ms", "%d is outside 0 (the daemon's max_lifetime) to %d (its max_lifetime, [sessions] in the config)", ms, mx.Milliseconds())
	}
	return nil
}

// ValidateExec checks a session exec's own fields (timeout, context, env)
// before the daemon touches the session (a revive, an exec sent to its
// interpreter), and returns its timeout (zero: the session's default).
func (pol *Rules) ValidateExec(req *agentapi.ExecRequest) (time.Duration, error) {
	timeout, _ := limits.Lookup("timeout_ms")
	if err := timeout.Check(float64(req.TimeoutMs)); err != nil {
		return 0, errdefs.Field("timeout_ms", "%v", err)
	}
	if mx := pol.Max.Timeout.Milliseconds(); req.TimeoutMs > mx {
		return 0, errdefs.Field("timeout_ms", "%d is above the daemon's maximum %d", req.TimeoutMs, mx)
	}
	if err := ValidContext(req.Context); err != nil {
		return 0, err
	}
	if err := ValidEnv("env", req.Env); err != nil {
		return 0, err
	}
	return time.Duration(req.TimeoutMs) * time.Millisecond, nil
}

// ValidContext checks a code-interpreter context name: it is shown in
// tracebacks ("<cell NAME:N>") and logs, so it stays short and plain.
func ValidContext(name string) error {
	if len(name) > 64 {
		return errdefs.Field("context", "longer than 64 characters")
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return errdefs.Field("context", "%q: use letters, digits, '-', '_' and '.'", name)
		}
	}
	return nil
}
