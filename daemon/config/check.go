package config

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"path/filepath"
	"strconv"

	"github.com/nsbox/nsbox/agentapi/limits"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/rootfs"
)

// check finds what is wrong with the merged configuration; each problem
// carries the line of the key that caused it.
func (cfg *Config) check() []Error {
	var errs []Error
	bad := func(key, format string, args ...any) {
		errs = append(errs, Error{Line: cfg.lines[key], Key: key, Msg: fmt.Sprintf(format, args...)})
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
		if err := CheckMetricsAddr(cfg.MetricsListen); err != nil {
			bad("metrics_listen", "%v", err)
		}
	}

	d, m := cfg.Limits()
	for _, f := range limitFields(d, m) {
		if f.a > f.b {
			key := "default_limits." + f.key
			if !cfg.isSet(key) {
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
	cfg.checkSessions(bad)
	cfg.checkPool(bad)
	cfg.Network.Check(cfg.Profiles, bad)
	cfg.checkLanguages(bad)
	cfg.checkE2B(bad)
	cfg.checkDatasets(bad)
	return errs
}

// Warnings are problems that do not stop the daemon: built-in profiles
// above this daemon's maxima (runs that select them are refused).
func (cfg Config) Warnings() []Error {
	var ws []Error
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
func (cfg *Config) profileExcess() []Error {
	_, m := cfg.Limits()
	var out []Error
	for _, p := range cfg.Profiles {
		for _, f := range limitFields(limits.FromWire(p.Limits), m) {
			if f.a > f.b {
				key := "profiles." + p.Name + "." + f.key
				out = append(out, Error{Line: cfg.lines[key], Key: key,
					Msg: fmt.Sprintf("%s is above the maximum %s (max_limits.%s)", f.show(f.a), f.show(f.b), f.key)})
			}
		}
	}
	return out
}

// limitField pairs one limit of two Limits, as float64 for comparison.
type limitField struct {
	key  string
	a, b float64
	show func(float64) string
}

func limitFields(a, b container.Limits) []limitField {
	out := make([]limitField, 0, len(limits.Table))
	for _, r := range limits.Table {
		out = append(out, limitField{r.Key, r.Get(a), r.Get(b), r.Format})
	}
	return out
}

// CheckMetricsAddr accepts loopback host:port addresses only: metrics are
// for the host, never the network.
func CheckMetricsAddr(addr string) error {
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

// Level is log_level as a slog level (info when it does not parse, which
// Load does not let through).
func (cfg Config) Level() slog.Level {
	l, _ := parseLogLevel(cfg.LogLevel)
	return l
}

func parseLogLevel(s string) (slog.Level, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("%q: use debug, info, warn or error", s)
	}
	return level, nil
}
