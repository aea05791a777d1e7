// Package config is the nsbox daemon's configuration: its defaults, the
// TOML file (scripts/nsbox.conf.example documents every key), the values
// flags and NSBOX_* environment variables set over it, the checks that
// report every problem with its line, and what a reload may change live
// (Policy) or only at the next start (RestartKeys).
package config

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/config/internal/tomlval"
	"github.com/nsbox/nsbox/daemon/config/netconf"
	"github.com/nsbox/nsbox/rootfs"
)

// Config is the daemon's configuration. Sources, weakest first: built-in
// defaults (Default), the TOML config file, overrides (flags and their
// NSBOX_* environment variables).
type Config struct {
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
	// Sessions is [sessions] (sessions.go).
	Sessions Sessions
	// Pool is the warm pool: [pool] and [pools.NAME] (pool.go).
	Pool PoolConfig
	// Zygote is [zygote] (zygote.go).
	Zygote ZygoteConfig
	// Network is [network] (daemon/config/netconf).
	Network netconf.Config
	// Languages are [languages.NAME] (languages.go).
	Languages []Language
	// E2B is [e2b] (e2b.go).
	E2B E2BConfig
	// Datasets are the [[datasets]] entries (datasets.go).
	Datasets []Dataset
	// Security is [security] (security.go).
	Security SecurityConfig
	// Volumes is [volumes] (volumes.go).
	Volumes VolumesConfig
	// Budgets is [budgets] (budgets.go).
	Budgets BudgetsConfig

	lines map[string]int // key ("max_limits.memory") -> its line in File; 0 when an override set it
}

// Default is the configuration with no file and no overrides.
func Default() Config {
	return Config{
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
		Sessions:      defaultSessions(),
		Pool:          defaultPoolConfig(),
		Zygote:        defaultZygoteConfig(),
		Network:       netconf.Default(),
		Security:      defaultSecurityConfig(),
		Volumes:       defaultVolumesConfig(),
		Budgets:       defaultBudgetsConfig(),
		lines:         map[string]int{},
	}
}

// Override sets one key over the file: Key is the TOML key ("queue",
// "pool.size", "sessions.max") and Value the flag's typed value: a string,
// int, bool, time.Duration or []string (a string for a list key is split at
// commas, as in the file).
type Override struct {
	Key   string
	Value any
}

// Load merges the defaults, the TOML file at path ("" for none) and the
// overrides, and checks the result. When the configuration is wrong the
// error is an *Errors listing every problem with its line.
func Load(path string, overrides []Override) (Config, error) {
	var data []byte
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return Default(), fmt.Errorf("config file: %w", err)
		}
	}
	return load(path, data, overrides)
}

// load is Load with the file's content read: data is the file at path, if
// path is not "".
func load(path string, data []byte, overrides []Override) (Config, error) {
	cfg := Default()
	var errs []Error
	if path != "" {
		cfg.File = path
		errs = parse(data, &cfg)
	}
	for _, o := range overrides {
		if err := cfg.override(o); err != nil {
			errs = append(errs, Error{Key: o.Key, Msg: err.Error()})
			continue
		}
		cfg.lines[o.Key] = 0
	}
	if cfg.RootfsStore == "" {
		cfg.RootfsStore = filepath.Join(cfg.StateDir, "rootfs")
	}
	errs = append(errs, cfg.check()...)
	if len(errs) > 0 {
		sortErrors(errs)
		return cfg, &Errors{File: cfg.File, Errs: errs}
	}
	return cfg, nil
}

// stringKeys maps the string keys of the file to their fields.
func (cfg *Config) stringKeys() map[string]*string {
	return map[string]*string{
		"socket": &cfg.Socket, "state_dir": &cfg.StateDir, "run_dir": &cfg.RunDir, "rootfs_store": &cfg.RootfsStore,
		"default_rootfs": &cfg.DefaultRootfs, "log_format": &cfg.LogFormat, "log_level": &cfg.LogLevel,
		"metrics_listen": &cfg.MetricsListen, "cgroup_name": &cfg.CgroupName,
	}
}

// overrideKeys maps the keys an Override may set to their fields.
func (cfg *Config) overrideKeys() map[string]any {
	m := map[string]any{
		"max_concurrent": &cfg.MaxConcurrent, "queue": &cfg.Queue, "shutdown_grace": &cfg.ShutdownGrace,
		"sessions.max": &cfg.Sessions.Max, "sessions.idle_timeout": &cfg.Sessions.IdleTimeout, "sessions.max_lifetime": &cfg.Sessions.MaxLifetime,
		"sessions.idle_action": &cfg.Sessions.IdleAction,
		"pool.size":            &cfg.Pool.Size, "pool.refills": &cfg.Pool.Refills, "pool.spare_inits": &cfg.Pool.SpareInits, "pool.preimport": &cfg.Pool.Preimport, "pool.node_size": &cfg.Pool.NodeSize,
		"zygote.enabled": &cfg.Zygote.Enabled, "zygote.bare": &cfg.Zygote.Bare,
		"e2b.listen": &cfg.E2B.Listen, "e2b.keys_file": &cfg.E2B.KeysFile,
	}
	for k, p := range cfg.stringKeys() {
		m[k] = p
	}
	return m
}

// override stores o's value; the range checks are check's, as for the file.
func (cfg *Config) override(o Override) error {
	var ok bool
	switch dst := cfg.overrideKeys()[o.Key].(type) {
	case nil:
		return fmt.Errorf("no such key")
	case *string:
		ok = store(dst, o.Value)
	case *int:
		ok = store(dst, o.Value)
	case **int:
		var n int
		if ok = store(&n, o.Value); ok {
			*dst = &n
		}
	case *bool:
		ok = store(dst, o.Value)
	case *time.Duration:
		ok = store(dst, o.Value)
	case *[]string:
		if s, isString := o.Value.(string); isString {
			*dst, ok = tomlval.SplitList(s), true
		} else {
			ok = store(dst, o.Value)
		}
	}
	if !ok {
		return fmt.Errorf("value %v (%T) is of the wrong type", o.Value, o.Value)
	}
	return nil
}

// store sets *dst to v when v is a T.
func store[T any](dst *T, v any) bool {
	x, ok := v.(T)
	if ok {
		*dst = x
	}
	return ok
}

// isSet says whether the file or an override set key.
func (cfg *Config) isSet(key string) bool {
	_, ok := cfg.lines[key]
	return ok
}

// profile returns the profile named name, adding an empty one if needed.
// The pointer is valid until the next call.
func (cfg *Config) profile(name string) *agentapi.Profile {
	for i := range cfg.Profiles {
		if cfg.Profiles[i].Name == name {
			return &cfg.Profiles[i]
		}
	}
	cfg.Profiles = append(cfg.Profiles, agentapi.Profile{Name: name})
	return &cfg.Profiles[len(cfg.Profiles)-1]
}
