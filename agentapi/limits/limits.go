// Package limits is the one table of a run's resource limits. Each row is
// one limit with all its names (the wire field of agentapi.Limits, the
// engine's field of Set, the flag of exec/session/mcp and the TOML key),
// its unit with its reader and printer, and its minimum, default and
// maximum. Every layer that handles limits (the API's validation, the
// conversions between wire and engine, the engine's own check, the flags,
// the configuration file) walks Table instead of naming the fields again:
// adding a limit is a row here plus the engine's enforcement.
//
// It imports the wire types and nothing of the engine, so that the CLI's
// flag code builds without the engine (and off Linux).
package limits

import (
	"cmp"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/nsbox/nsbox/agentapi"
)

// Set is one value per limit in the engine's units; container.Limits is
// this type. A zero field means "not set": Or fills it.
type Set struct {
	Timeout     time.Duration
	MemoryBytes int64
	Pids        int64
	CPUs        float64
	DiskBytes   int64 // size of /workspace; /tmp and /dev/shm get the same cap each
	OutputBytes int64 // per stream (stdout, stderr)
}

// Unit is how a limit is counted on the wire, read and printed.
type Unit int

const (
	Millis Unit = iota // on the wire in ms; in the engine, flags and TOML a duration
	Bytes              // a byte count; flags and TOML take sizes like 512M
	Count              // a whole number
	Cores              // a CPU count, fractions allowed
)

// Row is one limit. Min, Default and Max are in the wire's unit (ms,
// bytes, a count, cores).
type Row struct {
	Key   string // the flag's name and the TOML key: "memory"
	Field string // the JSON name in agentapi.Limits: "memory_bytes"
	Unit  Unit
	// Min is the least a set value may be: the engine refuses less (a
	// Python does not start in less memory; one process needs a second
	// pid to fork), and the API refuses it before any sandbox work.
	Min float64
	// Default is what an absent value becomes unless the daemon's
	// configuration says otherwise.
	Default float64
	// max is the most a request may ask for unless configured.
	max func() float64
	// Ceiling, when set, is the most a configuration may say.
	Ceiling float64
	// PerRun marks a limit of each run (or exec) rather than of the
	// sandbox: a pooled or session sandbox is made without it.
	PerRun bool
	// Usage is the flag's help text.
	Usage string

	wire   func(*agentapi.Limits) any // *int64 or *float64
	engine func(*Set) any             // *time.Duration, *int64 or *float64
}

func constant(v float64) func() float64 { return func() float64 { return v } }

// Table is every limit, in the order flags and messages list them.
var Table = []Row{
	{
		Key: "timeout", Field: "timeout_ms", Unit: Millis, Min: 1, Default: 30_000, max: constant(600_000), PerRun: true,
		Usage:  "wall-clock limit; the whole sandbox is killed at the deadline",
		wire:   func(l *agentapi.Limits) any { return &l.TimeoutMs },
		engine: func(s *Set) any { return &s.Timeout },
	},
	{
		Key: "memory", Field: "memory_bytes", Unit: Bytes, Min: 8 << 20, Default: 512 << 20, max: constant(8 << 30),
		Usage:  "memory limit (swap is off)",
		wire:   func(l *agentapi.Limits) any { return &l.MemoryBytes },
		engine: func(s *Set) any { return &s.MemoryBytes },
	},
	{
		Key: "pids", Field: "pids", Unit: Count, Min: 2, Default: 64, max: constant(4096), Ceiling: 1 << 22,
		Usage:  "maximum number of processes and threads",
		wire:   func(l *agentapi.Limits) any { return &l.Pids },
		engine: func(s *Set) any { return &s.Pids },
	},
	{
		Key: "cpus", Field: "cpus", Unit: Cores, Min: 0.01, Default: 1, max: func() float64 { return float64(runtime.NumCPU()) }, Ceiling: 4096,
		Usage:  "CPU quota in cores",
		wire:   func(l *agentapi.Limits) any { return &l.CPUs },
		engine: func(s *Set) any { return &s.CPUs },
	},
	{
		Key: "disk", Field: "disk_bytes", Unit: Bytes, Min: 1 << 20, Default: 256 << 20, max: constant(8 << 30),
		Usage:  "size of /workspace (and of /tmp, /dev/shm each)",
		wire:   func(l *agentapi.Limits) any { return &l.DiskBytes },
		engine: func(s *Set) any { return &s.DiskBytes },
	},
	{
		Key: "output", Field: "output_bytes", Unit: Bytes, Min: 1, Default: 1 << 20, max: constant(64 << 20), PerRun: true,
		Usage:  "cap per output stream; passing it kills the run",
		wire:   func(l *agentapi.Limits) any { return &l.OutputBytes },
		engine: func(s *Set) any { return &s.OutputBytes },
	},
}

// Lookup finds a row by its key ("memory") or wire field ("memory_bytes",
// "limits.memory_bytes").
func Lookup(name string) (Row, bool) {
	name = strings.TrimPrefix(name, "limits.")
	for _, r := range Table {
		if r.Key == name || r.Field == name {
			return r, true
		}
	}
	return Row{}, false
}

// Max is the most a request may ask for unless the daemon is configured
// otherwise (cpus: the host's CPUs).
func (r Row) Max() float64 { return r.max() }

// Wire is the row's value in l, in the wire's unit.
func (r Row) Wire(l agentapi.Limits) float64 {
	switch p := r.wire(&l).(type) {
	case *int64:
		return float64(*p)
	case *float64:
		return *p
	}
	panic("limits: bad wire field of " + r.Key)
}

// SetWire stores v (in the wire's unit) into l.
func (r Row) SetWire(l *agentapi.Limits, v float64) {
	switch p := r.wire(l).(type) {
	case *int64:
		*p = toInt(v)
	case *float64:
		*p = v
	}
}

// Get is the row's value in s, in the wire's unit.
func (r Row) Get(s Set) float64 {
	switch p := r.engine(&s).(type) {
	case *time.Duration:
		return float64(*p) / float64(time.Millisecond)
	case *int64:
		return float64(*p)
	case *float64:
		return *p
	}
	panic("limits: bad engine field of " + r.Key)
}

// Put stores v (in the wire's unit) into s.
func (r Row) Put(s *Set, v float64) {
	switch p := r.engine(s).(type) {
	case *time.Duration:
		*p = time.Duration(toInt(math.Round(v * float64(time.Millisecond))))
	case *int64:
		*p = toInt(v)
	case *float64:
		*p = v
	}
}

// toInt converts v, saturating rather than wrapping where it does not fit.
func toInt(v float64) int64 {
	switch {
	case v >= math.MaxInt64:
		return math.MaxInt64
	case v <= math.MinInt64:
		return math.MinInt64
	}
	return int64(v)
}

// Format writes v (in the wire's unit) as a flag or TOML value takes it:
// 30s, 512 MiB, 64, 0.5.
func (r Row) Format(v float64) string {
	switch r.Unit {
	case Millis:
		return ShortDuration(time.Duration(toInt(v * float64(time.Millisecond))))
	case Bytes:
		return HumanBytes(toInt(v))
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// Parse reads a value as a flag takes it (30s, 512M, 64, 0.5) into the
// wire's unit. It does not check the range: see Check.
func (r Row) Parse(s string) (float64, error) {
	switch r.Unit {
	case Millis:
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("want a duration like 30s or 5m")
		}
		return float64(d) / float64(time.Millisecond), nil
	case Bytes:
		n, err := ParseSize(s)
		return float64(n), err
	case Count:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("want a whole number")
		}
		return float64(n), nil
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("want a number (fractions allowed)")
	}
	return f, nil
}

// Check refuses a set value (non-zero, in the wire's unit) that no sandbox
// could run with: negative, not a number or below the minimum. Zero means "not set" and passes.
func (r Row) Check(v float64) error {
	switch {
	case v == 0:
		return nil
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Errorf("%v is not a number", v)
	case v < 0:
		return fmt.Errorf("%s is negative", r.num(v))
	case v < r.Min:
		return fmt.Errorf("%s is below the minimum %s", r.num(v), r.num(r.Min))
	}
	return nil
}

// num writes v in the wire's unit, as error messages about a field do.
func (r Row) num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// CheckWire checks every set field of l (Row.Check) and names the first
// bad one by its wire field: limits.memory_bytes.
func CheckWire(l agentapi.Limits) (field string, err error) {
	for _, r := range Table {
		if err := r.Check(r.Wire(l)); err != nil {
			return "limits." + r.Field, err
		}
	}
	return "", nil
}

// CheckSet is CheckWire for engine values, naming the limit by its key.
func CheckSet(s Set) (key string, err error) {
	for _, r := range Table {
		if err := r.Check(r.Get(s)); err != nil {
			return r.Key, err
		}
	}
	return "", nil
}

// Defaults are the values of absent limits unless configured.
func Defaults() Set {
	var s Set
	for _, r := range Table {
		r.Put(&s, r.Default)
	}
	return s
}

// Maxima are the most a request may ask for unless configured.
func Maxima() Set {
	var s Set
	for _, r := range Table {
		r.Put(&s, r.Max())
	}
	return s
}

// Or returns s with its zero fields taken from base: the one filler of
// absent limits (defaults, profiles, pools).
func (s Set) Or(base Set) Set {
	for _, r := range Table {
		r.Put(&s, cmp.Or(r.Get(s), r.Get(base)))
	}
	return s
}

// Sandbox is s without the per-run limits (Row.PerRun): what a sandbox is
// made with, which a pooled sandbox must match.
func (s Set) Sandbox() Set {
	for _, r := range Table {
		if r.PerRun {
			r.Put(&s, 0)
		}
	}
	return s
}

// WithDefaults returns s with zero fields filled from Defaults.
func (s Set) WithDefaults() Set { return s.Or(Defaults()) }

// FromWire converts wire limits to the engine's; with ToWire it is the one
// conversion pair between the two layers.
func FromWire(l agentapi.Limits) Set {
	var s Set
	for _, r := range Table {
		r.Put(&s, r.Wire(l))
	}
	return s
}

// ToWire converts engine limits to their wire form.
func ToWire(s Set) agentapi.Limits {
	var l agentapi.Limits
	for _, r := range Table {
		r.SetWire(&l, r.Get(s))
	}
	return l
}

// Above names the first limit of s above the same limit of mx, with both
// values in the wire's unit.
func Above(s, mx Set) (r Row, got, limit float64, above bool) {
	for _, r := range Table {
		if g, m := r.Get(s), r.Get(mx); g > m {
			return r, g, m, true
		}
	}
	return Row{}, 0, 0, false
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
