package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/rootfs"
	"github.com/urfave/cli/v2"
)

// daemonConfig is the daemon's configuration. Sources, weakest first:
// built-in defaults, the --config JSON file, NSBOX_* environment variables,
// flags.
type daemonConfig struct {
	Socket        string          `json:"socket"`
	StateDir      string          `json:"state_dir"`
	RunDir        string          `json:"run_dir"`
	RootfsStore   string          `json:"rootfs_store"` // default <state_dir>/rootfs
	DefaultRootfs string          `json:"default_rootfs"`
	MaxConcurrent int             `json:"max_concurrent"`
	Queue         *int            `json:"queue"` // nil: 2*max_concurrent; 0: no queue
	LogFormat     string          `json:"log_format"`
	LogLevel      string          `json:"log_level"`
	MetricsListen string          `json:"metrics_listen"`
	ShutdownGrace duration        `json:"shutdown_grace"`
	CgroupName    string          `json:"cgroup_name"`
	MaxLimits     agentapi.Limits `json:"max_limits"`
	DefaultLimits agentapi.Limits `json:"default_limits"`
}

// duration is a time.Duration written as a Go duration string ("30s").
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string like \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = duration(v)
	return nil
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
		ShutdownGrace: duration(30 * time.Second),
		CgroupName:    "nsbox",
	}
}

// parseDaemonConfig reads a JSON config file over base. Unknown keys are
// errors, so a typo does not go unnoticed.
func parseDaemonConfig(r io.Reader, base daemonConfig) (daemonConfig, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	cfg := base
	if err := dec.Decode(&cfg); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return base, fmt.Errorf("malformed JSON at byte %d: %w", se.Offset, err)
		}
		return base, err
	}
	return cfg, nil
}

// loadDaemonConfig merges defaults, the config file and the flags (which
// include their NSBOX_* environment variables).
func loadDaemonConfig(c *cli.Context) (daemonConfig, error) {
	cfg := defaultDaemonConfig()
	if p := c.String("config"); p != "" {
		f, err := os.Open(p)
		if err != nil {
			return cfg, fmt.Errorf("config file: %w", err)
		}
		cfg, err = parseDaemonConfig(f, cfg)
		f.Close()
		if err != nil {
			return cfg, fmt.Errorf("config file %s: %w", p, err)
		}
	}
	str := map[string]*string{
		"socket": &cfg.Socket, "state-dir": &cfg.StateDir, "run-dir": &cfg.RunDir, "rootfs-store": &cfg.RootfsStore,
		"default-rootfs": &cfg.DefaultRootfs, "log-format": &cfg.LogFormat, "log-level": &cfg.LogLevel,
		"metrics-listen": &cfg.MetricsListen, "cgroup-name": &cfg.CgroupName,
	}
	for name, dst := range str {
		if c.IsSet(name) {
			*dst = c.String(name)
		}
	}
	if c.IsSet("max-concurrent") {
		cfg.MaxConcurrent = c.Int("max-concurrent")
	}
	if c.IsSet("queue") {
		q := c.Int("queue")
		cfg.Queue = &q
	}
	if c.IsSet("shutdown-grace") {
		cfg.ShutdownGrace = duration(c.Duration("shutdown-grace"))
	}
	if cfg.RootfsStore == "" {
		cfg.RootfsStore = filepath.Join(cfg.StateDir, "rootfs")
	}
	return cfg, cfg.check()
}

func (cfg daemonConfig) check() error {
	switch {
	case cfg.MaxConcurrent < 1:
		return fmt.Errorf("max-concurrent %d: must be at least 1", cfg.MaxConcurrent)
	case cfg.Queue != nil && *cfg.Queue < 0:
		return fmt.Errorf("queue %d: must not be negative", *cfg.Queue)
	case cfg.LogFormat != "json" && cfg.LogFormat != "text":
		return fmt.Errorf("log-format %q: use json or text", cfg.LogFormat)
	case cfg.ShutdownGrace <= 0:
		return fmt.Errorf("shutdown-grace %v: must be positive", time.Duration(cfg.ShutdownGrace))
	case cfg.Socket == "" || cfg.RunDir == "" || cfg.StateDir == "":
		return errors.New("socket, state-dir and run-dir must not be empty")
	case cfg.CgroupName == "" || filepath.Base(cfg.CgroupName) != cfg.CgroupName:
		return fmt.Errorf("cgroup-name %q: must be a single path element", cfg.CgroupName)
	}
	return nil
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
