package main

import (
	"fmt"
	"github.com/nsbox/nsbox/daemon/policy"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/rootfs"
	"github.com/urfave/cli/v2"
)

// daemonConfig is the daemon's configuration. Sources, weakest first:
// built-in defaults, the TOML config file (scripts/nsbox.conf.example
// documents every key), NSBOX_* environment variables, flags.
type daemonConfig struct {
	File          string // the config file read; "" when none
	Socket        string
	StateDir      string
	RunDir        string
	RootfsStore   string // default <state_dir>/rootfs
	DefaultRootfs string
	MaxConcurrent int
	Queue         *int // nil: 2*max_concurrent; 0: no queue
	LogFormat     string
	LogLevel      string
	MetricsListen string
	ShutdownGrace time.Duration
	CgroupName    string
	DefaultLimits agentapi.Limits
	MaxLimits     agentapi.Limits
	// Profiles are the built-in ones with the file's [profiles.NAME]
	// tables applied: a table for a built-in name changes the keys it sets,
	// any other name adds a profile.
	Profiles []agentapi.Profile
	// Pool is the warm pool: [pool] and [pools.NAME] (daemon_pool.go).
	Pool poolConfig
	// Zygote is [zygote] (daemon_zygote.go).
	Zygote zygoteConfig

	lines map[string]int // key ("max_limits.memory") -> its line in File; 0 when a flag set it
}

func defaultDaemonConfig() daemonConfig {
	return daemonConfig{
		Socket:        agentapi.DefaultSocket,
		StateDir:      "/var/lib/nsbox",
		RunDir:        "/run/nsbox",
		DefaultRootfs: rootfs.DefaultName,
		MaxConcurrent: runtime.NumCPU(),
		LogFormat:     "text",
		LogLevel:      "info",
		ShutdownGrace: 30 * time.Second,
		CgroupName:    "nsbox",
		Profiles:      agentapi.BuiltinProfiles(),
		Pool:          defaultPoolConfig(),
		Zygote:        defaultZygoteConfig(),
		lines:         map[string]int{},
	}
}

// stringKeys maps the string keys of the file to their fields.
func (cfg *daemonConfig) stringKeys() map[string]*string {
	return map[string]*string{
		"socket": &cfg.Socket, "state_dir": &cfg.StateDir, "run_dir": &cfg.RunDir, "rootfs_store": &cfg.RootfsStore,
		"default_rootfs": &cfg.DefaultRootfs, "log_format": &cfg.LogFormat, "log_level": &cfg.LogLevel,
		"metrics_listen": &cfg.MetricsListen, "cgroup_name": &cfg.CgroupName,
	}
}

// profile returns the profile named name, adding an empty one if needed.
// The pointer is valid until the next call.
func (cfg *daemonConfig) profile(name string) *agentapi.Profile {
	for i := range cfg.Profiles {
		if cfg.Profiles[i].Name == name {
			return &cfg.Profiles[i]
		}
	}
	cfg.Profiles = append(cfg.Profiles, agentapi.Profile{Name: name})
	return &cfg.Profiles[len(cfg.Profiles)-1]
}

// loadDaemonConfig merges defaults, the config file and the flags (which
// include their NSBOX_* environment variables) and checks the result. Its
// error is a *configErrors listing every problem, with lines.
func loadDaemonConfig(c *cli.Context) (daemonConfig, error) {
	cfg := defaultDaemonConfig()
	var errs []configError
	if p := c.String("config"); p != "" {
		data, err := os.ReadFile(p)
		if err != nil {
			return cfg, fmt.Errorf("config file: %w", err)
		}
		cfg.File = p
		errs = parseConfigFile(data, &cfg)
	}
	keys := cfg.stringKeys()
	for _, name := range []string{"socket", "state-dir", "run-dir", "rootfs-store", "default-rootfs", "log-format", "log-level", "metrics-listen", "cgroup-name"} {
		if c.IsSet(name) {
			key := flagKey(name)
			*keys[key] = c.String(name)
			cfg.lines[key] = 0
		}
	}
	if c.IsSet("max-concurrent") {
		cfg.MaxConcurrent, cfg.lines["max_concurrent"] = c.Int("max-concurrent"), 0
	}
	if c.IsSet("queue") {
		q := c.Int("queue")
		cfg.Queue, cfg.lines["queue"] = &q, 0
	}
	if c.IsSet("shutdown-grace") {
		cfg.ShutdownGrace, cfg.lines["shutdown_grace"] = c.Duration("shutdown-grace"), 0
	}
	cfg.mergePoolFlags(c)
	cfg.mergeZygoteFlags(c)
	if cfg.RootfsStore == "" {
		cfg.RootfsStore = filepath.Join(cfg.StateDir, "rootfs")
	}
	errs = append(errs, cfg.check()...)
	if len(errs) > 0 {
		sortErrors(errs)
		return cfg, &configErrors{File: cfg.File, Errs: errs}
	}
	return cfg, nil
}

// flagKey turns a flag name into its config key: state-dir -> state_dir.
func flagKey(flag string) string {
	b := []byte(flag)
	for i, c := range b {
		if c == '-' {
			b[i] = '_'
		}
	}
	return string(b)
}

// check finds what is wrong with the merged configuration; each problem
// carries the line of the key that caused it.
func (cfg *daemonConfig) check() []configError {
	var errs []configError
	bad := func(key, format string, args ...any) {
		errs = append(errs, configError{Line: cfg.lines[key], Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	for _, k := range []struct{ key, val string }{{"socket", cfg.Socket}, {"state_dir", cfg.StateDir}, {"run_dir", cfg.RunDir}, {"rootfs_store", cfg.RootfsStore}} {
		if !filepath.IsAbs(k.val) {
			bad(k.key, "%q: must be an absolute path", k.val)
		}
	}
	if cfg.CgroupName == "" || filepath.Base(cfg.CgroupName) != cfg.CgroupName || cfg.CgroupName == "." || cfg.CgroupName == ".." {
		bad("cgroup_name", "%q: must be a single path element", cfg.CgroupName)
	}
	if err := rootfs.ValidName(cfg.DefaultRootfs); err != nil {
		bad("default_rootfs", "%v", err)
	}
	if cfg.MaxConcurrent < 1 {
		bad("max_concurrent", "%d: must be at least 1", cfg.MaxConcurrent)
	}
	if cfg.Queue != nil && *cfg.Queue < 0 {
		bad("queue", "%d: must not be negative (0 means no queue)", *cfg.Queue)
	}
	if cfg.LogFormat != "json" && cfg.LogFormat != "text" {
		bad("log_format", "%q: use json or text", cfg.LogFormat)
	}
	if _, err := parseLogLevel(cfg.LogLevel); err != nil {
		bad("log_level", "%v", err)
	}
	if cfg.ShutdownGrace <= 0 {
		bad("shutdown_grace", "%v: must be positive", cfg.ShutdownGrace)
	}
	if cfg.MetricsListen != "" {
		if err := checkMetricsAddr(cfg.MetricsListen); err != nil {
			bad("metrics_listen", "%v", err)
		}
	}

	d, m := cfg.limits()
	for _, f := range limitFields(d, m) {
		if f.a > f.b {
			key := "default_limits." + f.key
			if _, ok := cfg.lines[key]; !ok {
				key = "max_limits." + f.key
			}
			bad(key, "the default %s is above the maximum %s; raise max_limits.%s or lower default_limits.%s",
				f.show(f.a), f.show(f.b), f.key, f.key)
		}
	}
	for _, w := range cfg.profileExcess() {
		if w.Line > 0 {
			errs = append(errs, w)
		}
	}
	cfg.checkPool(bad)
	return errs
}

// warnings are problems that do not stop the daemon: built-in profiles
// above this daemon's maxima (runs that select them are refused).
func (cfg *daemonConfig) warnings() []configError {
	var ws []configError
	for _, w := range cfg.profileExcess() {
		if w.Line == 0 {
			w.Msg += "; runs selecting this profile will be refused"
			ws = append(ws, w)
		}
	}
	return ws
}

// profileExcess lists profile limits above the maxima, with the line of the
// key when the file set it.
func (cfg *daemonConfig) profileExcess() []configError {
	_, m := cfg.limits()
	var out []configError
	for _, p := range cfg.Profiles {
		for _, f := range limitFields(engineLimits(p.Limits), m) {
			if f.a > f.b {
				key := "profiles." + p.Name + "." + f.key
				out = append(out, configError{Line: cfg.lines[key], Key: key,
					Msg: fmt.Sprintf("%s is above the maximum %s (max_limits.%s)", f.show(f.a), f.show(f.b), f.key)})
			}
		}
	}
	return out
}

// limits returns the effective default and maximum limits.
func (cfg *daemonConfig) limits() (d, m container.Limits) {
	d = engineLimits(cfg.DefaultLimits).WithDefaults()
	m = engineLimits(cfg.MaxLimits)
	dm := policy.DefaultMaxLimits()
	if m.Timeout == 0 {
		m.Timeout = dm.Timeout
	}
	if m.MemoryBytes == 0 {
		m.MemoryBytes = dm.MemoryBytes
	}
	if m.Pids == 0 {
		m.Pids = dm.Pids
	}
	if m.CPUs == 0 {
		m.CPUs = dm.CPUs
	}
	if m.DiskBytes == 0 {
		m.DiskBytes = dm.DiskBytes
	}
	if m.OutputBytes == 0 {
		m.OutputBytes = dm.OutputBytes
	}
	return d, m
}

// limitField pairs one limit of two Limits, as float64 for comparison.
type limitField struct {
	key  string
	a, b float64
	show func(float64) string
}

func limitFields(a, b container.Limits) []limitField {
	bytes := func(v float64) string { return humanBytes(int64(v)) }
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	dur := func(v float64) string { return time.Duration(v).String() }
	return []limitField{
		{"timeout", float64(a.Timeout), float64(b.Timeout), dur},
		{"memory", float64(a.MemoryBytes), float64(b.MemoryBytes), bytes},
		{"pids", float64(a.Pids), float64(b.Pids), num},
		{"cpus", a.CPUs, b.CPUs, num},
		{"disk", float64(a.DiskBytes), float64(b.DiskBytes), bytes},
		{"output", float64(a.OutputBytes), float64(b.OutputBytes), bytes},
	}
}

// checkMetricsAddr accepts loopback host:port addresses only: metrics are
// for the host, never the network.
func checkMetricsAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: want 127.0.0.1:PORT: %v", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%q: only loopback addresses (127.0.0.1, ::1, localhost) are allowed", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > math.MaxUint16 {
		return fmt.Errorf("%q: bad port", addr)
	}
	return nil
}

func parseLogLevel(s string) (slog.Level, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("%q: use debug, info, warn or error", s)
	}
	return level, nil
}

// engineLimits converts wire limits (from the config file) to engine limits.
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

// serverPolicy is the part of cfg a running server can take on reload.
func (cfg *daemonConfig) serverPolicy() policy.Policy {
	return policy.Policy{
		DefaultRootfs: cfg.DefaultRootfs,
		DefaultLimits: engineLimits(cfg.DefaultLimits),
		MaxLimits:     engineLimits(cfg.MaxLimits),
		Profiles:      cfg.Profiles,
	}
}

// restartKeys names the settings that differ between a and b and only take
// effect at the next start.
func restartKeys(a, b daemonConfig) []string {
	var keys []string
	for _, k := range []struct {
		key  string
		x, y any
	}{
		{"socket", a.Socket, b.Socket}, {"state_dir", a.StateDir, b.StateDir}, {"run_dir", a.RunDir, b.RunDir},
		{"rootfs_store", a.RootfsStore, b.RootfsStore}, {"cgroup_name", a.CgroupName, b.CgroupName},
		{"max_concurrent", a.MaxConcurrent, b.MaxConcurrent}, {"queue", queueString(a.Queue), queueString(b.Queue)},
		{"log_format", a.LogFormat, b.LogFormat}, {"metrics_listen", a.MetricsListen, b.MetricsListen},
		{"shutdown_grace", a.ShutdownGrace, b.ShutdownGrace}, {"pool", a.Pool.String(), b.Pool.String()},
		{"zygote", a.Zygote.String(), b.Zygote.String()},
	} {
		if k.x != k.y {
			keys = append(keys, k.key)
		}
	}
	return keys
}

func queueString(q *int) string {
	if q == nil {
		return "default"
	}
	return strconv.Itoa(*q)
}
