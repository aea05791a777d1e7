package main

import (
	"fmt"
	"runtime"
	"slices"
	"strings"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/pool"
	"github.com/nsbox/nsbox/rootfs"
	"github.com/pelletier/go-toml/v2/unstable"
	"github.com/urfave/cli/v2"
)

// defaultPoolName names the pool of the default rootfs and limits.
const defaultPoolName = "default"

// poolConfig is the warm pool's configuration: [pool] for the default
// pool (default rootfs, default limits) and [pools.NAME] for more.
type poolConfig struct {
	Size    int // default pool's size; -1: max(2, CPUs)
	Refills int // refills under way at once per pool (default 1)
	// SpareInits is how many sandbox inits the engine keeps cloned and
	// placed in their cgroups ahead of time, for any run (default 1).
	SpareInits int
	Preimport  []string
	Extra      []poolProfileConfig
}

// poolProfileConfig is one [pools.NAME] table.
type poolProfileConfig struct {
	Name      string
	Rootfs    string          // default: default_rootfs
	Size      int             // default 1
	Preimport []string        //
	Limits    agentapi.Limits // unset: default_limits; timeout and output are per run
}

func defaultPoolConfig() poolConfig { return poolConfig{Size: -1, Refills: 1, SpareInits: 1} }

// defaultPoolSize sizes the default pool for the host: one runner per core,
// at least two.
func defaultPoolSize() int { return max(2, runtime.NumCPU()) }

func poolFlags() []cli.Flag {
	env := func(name string) []string { return []string{"NSBOX_" + name} }
	return []cli.Flag{
		&cli.IntFlag{Name: "pool-size", Usage: "warm Python runners kept ready for the default rootfs and limits (default max(2, CPUs); 0: no pool)", EnvVars: env("POOL_SIZE")},
		&cli.StringFlag{Name: "pool-preimport", Usage: "modules the default pool imports ahead of time, comma-separated (e.g. numpy,pandas,matplotlib)", EnvVars: env("POOL_PREIMPORT")},
		&cli.IntFlag{Name: "pool-refills", Usage: "pooled runners of one pool started at once (default 1): the pool's CPU budget", EnvVars: env("POOL_REFILLS")},
		&cli.IntFlag{Name: "spare-inits", Usage: "sandbox inits kept cloned and placed in their cgroups ahead of time, for any run (default 1; 0: none)", EnvVars: env("SPARE_INITS")},
	}
}

// mergePoolFlags applies the pool flags over the file's values.
func (cfg *daemonConfig) mergePoolFlags(c *cli.Context) {
	if c.IsSet("pool-size") {
		cfg.Pool.Size, cfg.lines["pool.size"] = c.Int("pool-size"), 0
	}
	if c.IsSet("pool-refills") {
		cfg.Pool.Refills, cfg.lines["pool.refills"] = c.Int("pool-refills"), 0
	}
	if c.IsSet("spare-inits") {
		cfg.Pool.SpareInits, cfg.lines["pool.spare_inits"] = c.Int("spare-inits"), 0
	}
	if c.IsSet("pool-preimport") {
		cfg.Pool.Preimport, cfg.lines["pool.preimport"] = splitList(c.String("pool-preimport")), 0
	}
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// extraPool returns the [pools.NAME] entry, adding it if needed. The
// pointer is valid until the next call.
func (pc *poolConfig) extraPool(name string) *poolProfileConfig {
	for i := range pc.Extra {
		if pc.Extra[i].Name == name {
			return &pc.Extra[i]
		}
	}
	pc.Extra = append(pc.Extra, poolProfileConfig{Name: name, Size: 1})
	return &pc.Extra[len(pc.Extra)-1]
}

// setPoolKey stores a key of [pool] or [pools.NAME].
func (cfg *daemonConfig) setPoolKey(key []string, v *unstable.Node) error {
	switch {
	case len(key) == 2 && key[0] == "pool":
		switch key[1] {
		case "size":
			n, err := tomlInt(v)
			if err != nil {
				return err
			}
			if n < 0 || n > 1024 {
				return fmt.Errorf("%d: must be between 0 (no pool) and 1024", n)
			}
			cfg.Pool.Size = int(n)
		case "refills":
			n, err := tomlInt(v)
			if err != nil {
				return err
			}
			if n < 1 || n > 64 {
				return fmt.Errorf("%d: must be between 1 and 64", n)
			}
			cfg.Pool.Refills = int(n)
		case "preimport":
			l, err := tomlModules(v)
			if err != nil {
				return err
			}
			cfg.Pool.Preimport = l
		case "spare_inits":
			n, err := tomlInt(v)
			if err != nil {
				return err
			}
			if n < 0 || n > 64 {
				return fmt.Errorf("%d: must be between 0 and 64", n)
			}
			cfg.Pool.SpareInits = int(n)
		default:
			return fmt.Errorf("unknown key; [pool] has size, refills, preimport and spare_inits")
		}
		return nil
	case len(key) == 3 && key[0] == "pools":
		if key[1] == defaultPoolName {
			return fmt.Errorf("the default pool is configured in [pool]")
		}
		if msg := profileNameError(key[1]); msg != "" {
			return fmt.Errorf("pool %s", msg)
		}
		pp := cfg.Pool.extraPool(key[1])
		switch key[2] {
		case "rootfs":
			s, err := tomlString(v)
			if err != nil {
				return err
			}
			if err := rootfs.ValidName(s); err != nil {
				return err
			}
			pp.Rootfs = s
		case "size":
			n, err := tomlInt(v)
			if err != nil {
				return err
			}
			if n < 0 || n > 1024 {
				return fmt.Errorf("%d: must be between 0 and 1024", n)
			}
			pp.Size = int(n)
		case "preimport":
			l, err := tomlModules(v)
			if err != nil {
				return err
			}
			pp.Preimport = l
		case "memory", "pids", "cpus", "disk":
			return setLimit(&pp.Limits, key[2], v)
		case "timeout", "output":
			return fmt.Errorf("%s is per run, not part of a pool; leave it out", key[2])
		default:
			return fmt.Errorf("unknown key; [pools.NAME] has rootfs, size, preimport, memory, pids, cpus and disk")
		}
		return nil
	case len(key) == 2 && key[0] == "pools":
		return fmt.Errorf("must be a table ([pools.%s])", key[1])
	}
	return fmt.Errorf("unknown key; see scripts/nsbox.conf.example for the keys")
}

// tomlModules reads a module list: an array of strings or one
// comma-separated string.
func tomlModules(v *unstable.Node) ([]string, error) {
	var out []string
	switch v.Kind {
	case unstable.String:
		out = splitList(string(v.Data))
	case unstable.Array:
		it := v.Children()
		for it.Next() {
			s, err := tomlString(it.Node())
			if err != nil {
				return nil, fmt.Errorf("module list: %w", err)
			}
			out = append(out, s)
		}
	default:
		return nil, fmt.Errorf("want a list of module names like [\"numpy\", \"pandas\"], got a TOML %s", kindName(v.Kind))
	}
	for _, m := range out {
		if m == "" || strings.Trim(m, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.") != "" {
			return nil, fmt.Errorf("%q is not a Python module name", m)
		}
	}
	return out, nil
}

// checkPool finds what is wrong with the pool settings.
func (cfg *daemonConfig) checkPool(bad func(key, format string, args ...any)) {
	if cfg.Pool.Size < -1 {
		bad("pool.size", "%d: must not be negative (0: no pool)", cfg.Pool.Size)
	}
	if cfg.Pool.SpareInits < 0 || cfg.Pool.SpareInits > 64 {
		bad("pool.spare_inits", "%d: must be between 0 and 64", cfg.Pool.SpareInits)
	}
	if cfg.Pool.Refills < 1 {
		bad("pool.refills", "%d: must be at least 1", cfg.Pool.Refills)
	}
	d, m := cfg.limits()
	for _, pp := range cfg.Pool.Extra {
		l := poolLimits(pp.Limits, d)
		for _, f := range limitFields(l, m) {
			if f.a > f.b {
				bad("pools."+pp.Name+"."+f.key, "%s is above the maximum %s (max_limits.%s)", f.show(f.a), f.show(f.b), f.key)
			}
		}
	}
}

// poolLimits resolves a pool's limits over the daemon's defaults.
func poolLimits(l agentapi.Limits, d container.Limits) container.Limits {
	out := engineLimits(l)
	if out.MemoryBytes == 0 {
		out.MemoryBytes = d.MemoryBytes
	}
	if out.Pids == 0 {
		out.Pids = d.Pids
	}
	if out.CPUs == 0 {
		out.CPUs = d.CPUs
	}
	if out.DiskBytes == 0 {
		out.DiskBytes = d.DiskBytes
	}
	out.Timeout, out.OutputBytes = d.Timeout, d.OutputBytes
	return out
}

// poolProfiles are the pools to keep: the default one (unless its size is
// 0) and every [pools.NAME] with a size.
func (cfg *daemonConfig) poolProfiles() []pool.Profile {
	d, _ := cfg.limits()
	var out []pool.Profile
	size := cfg.Pool.Size
	if size < 0 {
		size = defaultPoolSize()
	}
	if size > 0 {
		out = append(out, pool.Profile{Name: defaultPoolName, Rootfs: cfg.DefaultRootfs, Limits: d, Preimport: cfg.Pool.Preimport, Size: size})
	}
	for _, pp := range cfg.Pool.Extra {
		if pp.Size == 0 {
			continue
		}
		r := pp.Rootfs
		if r == "" {
			r = cfg.DefaultRootfs
		}
		out = append(out, pool.Profile{Name: pp.Name, Rootfs: r, Limits: poolLimits(pp.Limits, d), Preimport: slices.Clone(pp.Preimport), Size: pp.Size})
	}
	return out
}

// poolString summarises the pool settings (restart-only on reload).
func (pc poolConfig) String() string {
	return fmt.Sprintf("%+v", pc.Extra) + fmt.Sprint(pc.Size, pc.Refills, pc.SpareInits, pc.Preimport)
}
