package cmdline

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/limits"
	"github.com/nsbox/nsbox/container/workspace"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// LimitFlags are the resource flags of exec and session create, one per row
// of the limits table, with --file and --env. Through a daemon a flag left
// out takes the daemon's default; inProcess names the engine's as well
// (exec).
func LimitFlags(session, inProcess bool) []cli.Flag {
	flags := TableFlags(func(r limits.Row) (usage, def string) {
		def = "the daemon's"
		if inProcess {
			def += "; " + flagValue(r, r.Default) + " in-process"
		}
		usage = r.Usage
		if session {
			switch r.Key {
			case "timeout":
				usage = "default timeout of each exec (the cell gets a KeyboardInterrupt)"
			case "output":
				usage = "output kept per exec and stream"
			case "memory":
				usage = "memory limit for the session's life (swap is off)"
			}
		}
		return usage, def
	})
	return append(flags,
		&cli.StringSliceFlag{Name: "file", Usage: "copy `LOCAL[:PATH]` into /workspace first (repeatable)"},
		&cli.StringSliceFlag{Name: "env", Usage: "set `K=V` in the sandbox (repeatable); nothing else of your environment goes in"},
	)
}

// flagValue writes v as the flag takes it: 512M rather than 512 MiB.
func flagValue(r limits.Row, v float64) string {
	if n := int64(v); r.Unit == limits.Bytes && n > 0 && n%(1<<20) == 0 {
		return fmt.Sprintf("%dM", n>>20)
	}
	return r.Format(v)
}

// TableFlags are one flag per row of the limits table, named by its key,
// with the usage and default text text gives it: a duration flag for a
// time, a size (512M) for bytes, a number otherwise. ReadLimits reads them.
func TableFlags(text func(limits.Row) (usage, def string)) []cli.Flag {
	flags := make([]cli.Flag, 0, len(limits.Table))
	for _, r := range limits.Table {
		usage, def := text(r)
		usage = withPlaceholder(r.Unit, usage)
		switch r.Unit {
		case limits.Millis:
			flags = append(flags, &cli.DurationFlag{Name: r.Key, Usage: usage, DefaultText: def})
		case limits.Bytes:
			flags = append(flags, &cli.StringFlag{Name: r.Key, Usage: usage, DefaultText: def})
		case limits.Count:
			flags = append(flags, &cli.Int64Flag{Name: r.Key, Usage: usage, DefaultText: def})
		case limits.Cores:
			flags = append(flags, &cli.Float64Flag{Name: r.Key, Usage: usage, DefaultText: def})
		}
	}
	return flags
}

// withPlaceholder names what a limit flag takes in its help, with
// examples, unless usage names it already (in backquotes, as urfave/cli
// reads it): `--timeout DURATION`, not `--timeout value`.
func withPlaceholder(u limits.Unit, usage string) string {
	if strings.Contains(usage, "`") {
		return usage
	}
	switch u {
	case limits.Millis:
		return usage + " (`DURATION`: 30s, 2m)"
	case limits.Bytes:
		return usage + " (`SIZE`: 512M, 2G)"
	case limits.Cores:
		return usage + " (`CORES`: 0.5, 2)"
	}
	return usage + " (a whole number `N`)"
}

// ReadLimits reads the limit flags that are set (TableFlags), each checked
// against its row: positive and at least the minimum. The others stay
// zero.
func ReadLimits(c *cli.Context) (limits.Set, error) {
	var l limits.Set
	for _, r := range limits.Table {
		var v float64
		switch r.Unit {
		case limits.Millis:
			if !c.IsSet(r.Key) {
				continue
			}
			v = float64(c.Duration(r.Key)) / float64(time.Millisecond)
		case limits.Bytes:
			// A size flag may have a value without being set (mcp's --output).
			s := c.String(r.Key)
			if s == "" {
				continue
			}
			n, err := limits.ParseSize(s)
			if err != nil {
				return l, UsageError(c, "--%s %s: %v", r.Key, s, err)
			}
			v = float64(n)
		case limits.Count:
			if !c.IsSet(r.Key) {
				continue
			}
			v = float64(c.Int64(r.Key))
		case limits.Cores:
			if !c.IsSet(r.Key) {
				continue
			}
			v = c.Float64(r.Key)
		}
		if v <= 0 {
			return l, UsageError(c, "--%s %s: must be positive", r.Key, FlagText(c, r.Key))
		}
		if err := r.Check(v); err != nil {
			return l, UsageError(c, "--%s %s: below the minimum %s", r.Key, FlagText(c, r.Key), r.Format(r.Min))
		}
		r.Put(&l, v)
	}
	return l, nil
}

// WireLimits is l for a request: nil when no flag set a limit.
func WireLimits(l limits.Set) *agentapi.Limits {
	if l == (limits.Set{}) {
		return nil
	}
	w := limits.ToWire(l)
	return &w
}

// ReadEnv reads --env K=V.
func ReadEnv(c *cli.Context) (map[string]string, error) {
	var env map[string]string
	for _, kv := range c.StringSlice("env") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, UsageError(c, "--env %q: want K=V", kv)
		}
		if k == "" {
			// The daemon checks the names (policy.ValidEnv).
			return nil, UsageError(c, "--env %q: want K=V", kv)
		}
		if env == nil {
			env = map[string]string{}
		}
		env[k] = v
	}
	return env, nil
}

// ReadFiles reads --file LOCAL[:PATH].
func ReadFiles(c *cli.Context) ([]agentapi.File, error) {
	var files []agentapi.File
	for _, arg := range c.StringSlice("file") {
		local, dst, ok := strings.Cut(arg, ":")
		if !ok {
			dst = filepath.Base(local)
		}
		if err := workspace.ValidPath(dst); err != nil {
			return nil, UsageError(c, "--file %s: %v", arg, err)
		}
		data, err := os.ReadFile(local)
		if err != nil {
			return nil, fmt.Errorf("--file: %w", err)
		}
		files = append(files, agentapi.File{Path: dst, ContentBase64: base64.StdEncoding.EncodeToString(data)})
	}
	return files, nil
}

// FlagText is the value of a flag as the user wrote it (durations in
// their shortest form).
func FlagText(c *cli.Context, flag string) string {
	if d, ok := c.Value(flag).(time.Duration); ok {
		return ShortDuration(d)
	}
	return fmt.Sprint(c.Value(flag))
}

// ShortDuration writes 1h rather than 1h0m0s.
func ShortDuration(d time.Duration) string { return limits.ShortDuration(d) }

var reBound = regexp.MustCompile(`^-?[0-9.e+]+ is (above the daemon's maximum|below the minimum) ([0-9.e+]+)`)

// FlagError rewrites a request error about a limit field into one about
// the flag that set it: "--timeout 1h: above the daemon's maximum 10m"
// rather than "limits.timeout_ms: 3600000 is above the daemon's maximum
// 600000". A refused request is a usage error (exit status 2) on every
// path, as a bad flag is; other errors come back as they are.
func FlagError(c *cli.Context, err error) error {
	field, msg := "", ""
	var ae *agentapi.Error
	var fe *errdefs.FieldError
	switch {
	case errors.As(err, &ae) && ae.Code == agentapi.CodeInvalidArgument:
		field, msg, _ = strings.Cut(ae.Message, ": ")
	case errors.As(err, &fe):
		field, msg = fe.Field, fe.Msg
	default:
		return err
	}
	// limits.timeout_ms, or a session exec's own timeout_ms.
	for _, r := range limits.Table {
		if r.Field != strings.TrimPrefix(field, "limits.") || !c.IsSet(r.Key) {
			continue
		}
		if m := reBound.FindStringSubmatch(msg); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			msg = m[1] + " " + r.Format(v)
		}
		return cli.Exit(fmt.Sprintf("--%s %s: %s", r.Key, FlagText(c, r.Key), msg), ExitUsage)
	}
	return usageExit{err} // the request the command line made is refused
}

// usageExit is a refused request's error, kept for errors.As, with the
// usage error's exit status.
type usageExit struct{ error }

func (e usageExit) Unwrap() error { return e.error }
func (usageExit) ExitCode() int   { return ExitUsage }

// CheckMaxima refuses limits above a default daemon's maxima, so that a run
// in-process takes what a run through a default daemon would.
func CheckMaxima(c *cli.Context, l limits.Set) error {
	if r, _, mx, above := limits.Above(l, limits.Maxima()); above {
		return cli.Exit(fmt.Sprintf("--%s %s: above a default daemon's maximum %s (add --above-max to allow it in-process)",
			r.Key, FlagText(c, r.Key), r.Format(mx)), ExitUsage)
	}
	return nil
}
