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
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/daemon/config"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/policy"
)

// limitFlag is one resource flag of exec and session create, with the API
// field it sets.
type limitFlag struct {
	name, field string
	// format writes a value of the field (in the API's unit) as the flag
	// takes it.
	format func(float64) string
}

var limitFlagTable = []limitFlag{
	{"timeout", "limits.timeout_ms", func(v float64) string { return ShortDuration(time.Duration(v) * time.Millisecond) }},
	{"memory", "limits.memory_bytes", func(v float64) string { return config.HumanBytes(int64(v)) }},
	{"pids", "limits.pids", func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }},
	{"cpus", "limits.cpus", func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }},
	{"disk", "limits.disk_bytes", func(v float64) string { return config.HumanBytes(int64(v)) }},
	{"output", "limits.output_bytes", func(v float64) string { return config.HumanBytes(int64(v)) }},
	// A session exec's own timeout.
	{"timeout", "timeout_ms", func(v float64) string { return ShortDuration(time.Duration(v) * time.Millisecond) }},
}

// LimitFlags are the resource flags. Through a daemon a flag left out takes
// the daemon's default; inProcess names the engine's as well (exec).
func LimitFlags(session, inProcess bool) []cli.Flag {
	d := container.DefaultLimits()
	def := func(v string) string {
		if inProcess {
			return "the daemon's; " + v + " in-process"
		}
		return "the daemon's"
	}
	timeout, output := "wall-clock limit; the whole sandbox is killed at the deadline", "cap per output stream; passing it kills the run"
	life := ""
	if session {
		timeout, output, life = "default timeout of each exec (the cell gets a KeyboardInterrupt)", "output kept per exec and stream", " for the session's life"
	}
	return []cli.Flag{
		&cli.DurationFlag{Name: "timeout", Usage: timeout, DefaultText: def(d.Timeout.String())},
		&cli.StringFlag{Name: "memory", Usage: "memory limit" + life + " (swap is off)", DefaultText: def(mebibytes(d.MemoryBytes))},
		&cli.Int64Flag{Name: "pids", Usage: "maximum number of processes and threads", DefaultText: def(fmt.Sprint(d.Pids))},
		&cli.Float64Flag{Name: "cpus", Usage: "CPU quota in cores", DefaultText: def(fmt.Sprint(d.CPUs))},
		&cli.StringFlag{Name: "disk", Usage: "size of /workspace (and of /tmp, /dev/shm each)", DefaultText: def(mebibytes(d.DiskBytes))},
		&cli.StringFlag{Name: "output", Usage: output, DefaultText: def(mebibytes(d.OutputBytes))},
		&cli.StringSliceFlag{Name: "file", Usage: "copy `LOCAL[:PATH]` into /workspace first (repeatable)"},
		&cli.StringSliceFlag{Name: "env", Usage: "set `K=V` in the sandbox (repeatable); nothing else of your environment goes in"},
	}
}

// ReadLimits reads the limit flags that are set; the others stay zero.
func ReadLimits(c *cli.Context) (container.Limits, error) {
	l := container.Limits{Timeout: c.Duration("timeout"), Pids: c.Int64("pids"), CPUs: c.Float64("cpus")}
	for _, s := range []struct {
		flag string
		dst  *int64
	}{{"memory", &l.MemoryBytes}, {"disk", &l.DiskBytes}, {"output", &l.OutputBytes}} {
		if !c.IsSet(s.flag) {
			continue
		}
		n, err := config.ParseSize(c.String(s.flag))
		if err != nil {
			return l, UsageError(c, "--%s %s: %v", s.flag, c.String(s.flag), err)
		}
		*s.dst = n
	}
	for _, f := range []struct {
		flag string
		v    float64
	}{{"timeout", float64(l.Timeout)}, {"memory", float64(l.MemoryBytes)}, {"pids", float64(l.Pids)},
		{"cpus", l.CPUs}, {"disk", float64(l.DiskBytes)}, {"output", float64(l.OutputBytes)}} {
		if c.IsSet(f.flag) && f.v <= 0 {
			return l, UsageError(c, "--%s %s: must be positive", f.flag, FlagText(c, f.flag))
		}
	}
	return l, nil
}

// WireLimits is l for a request: nil when no flag set a limit.
func WireLimits(l container.Limits) *agentapi.Limits {
	if l == (container.Limits{}) {
		return nil
	}
	w := policy.WireLimits(l)
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
		if err := container.ValidEnvKey(k); err != nil {
			return nil, UsageError(c, "--env %q: %v", kv, err)
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
		if err := container.ValidPath(dst); err != nil {
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
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

var reAboveMax = regexp.MustCompile(`^[0-9.e+]+ is above the daemon's maximum ([0-9.e+]+)`)

// FlagError rewrites a request error about a limit field into one about
// the flag that set it: "--timeout 1h: above the daemon's maximum 10m"
// rather than "limits.timeout_ms: 3600000 is above the daemon's maximum
// 600000". Other errors come back as they are.
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
	for _, f := range limitFlagTable {
		if f.field != field || !c.IsSet(f.name) {
			continue
		}
		if m := reAboveMax.FindStringSubmatch(msg); m != nil {
			mx, _ := strconv.ParseFloat(m[1], 64)
			msg = "above the daemon's maximum " + f.format(mx)
		}
		return fmt.Errorf("--%s %s: %s", f.name, FlagText(c, f.name), msg)
	}
	return err
}

// CheckMaxima refuses limits above a default daemon's maxima, so that a run
// in-process takes what a run through a default daemon would.
func CheckMaxima(c *cli.Context, l container.Limits) error {
	mx := policy.DefaultMaxLimits()
	for _, f := range []struct {
		flag     string
		got, max float64
	}{
		{"timeout", float64(l.Timeout.Milliseconds()), float64(mx.Timeout.Milliseconds())},
		{"memory", float64(l.MemoryBytes), float64(mx.MemoryBytes)}, {"pids", float64(l.Pids), float64(mx.Pids)},
		{"cpus", l.CPUs, mx.CPUs}, {"disk", float64(l.DiskBytes), float64(mx.DiskBytes)},
		{"output", float64(l.OutputBytes), float64(mx.OutputBytes)},
	} {
		if f.got > f.max {
			var format func(float64) string
			for _, lf := range limitFlagTable {
				if lf.name == f.flag {
					format = lf.format
					break
				}
			}
			return cli.Exit(fmt.Sprintf("--%s %s: above a default daemon's maximum %s (add --above-max to allow it in-process)",
				f.flag, FlagText(c, f.flag), format(f.max)), ExitUsage)
		}
	}
	return nil
}

// mebibytes writes a default size as the flags take it: 512M.
func mebibytes(n int64) string { return fmt.Sprintf("%dM", n>>20) }
