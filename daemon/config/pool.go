package config

import (
	"fmt"
	"github.com/nsbox/nsbox/agentapi/limits"
	"runtime"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/pool"
	"github.com/nsbox/nsbox/daemon/config/internal/tomlval"
	"github.com/nsbox/nsbox/daemon/lang"
	"github.com/nsbox/nsbox/rootfs"
)

// defaultPoolName names the pool of the default rootfs and limits.
const defaultPoolName = "default"

// PoolConfig is the warm pool's configuration: [pool] for the default
// pool (default rootfs, default limits) and [pools.NAME] for more.
type PoolConfig struct {
	Size    int // default pool's size; -1: max(2, CPUs)
	Refills int // refills under way at once per pool (default 1)
	// SpareInits is how many sandbox inits the engine keeps cloned and
	// placed in their cgroups ahead of time, for any run (default 1).
	SpareInits int
	Preimport  []string
	// NodeSize is the size of the built-in pool of Node runners on the
	// default rootfs ("node"; default 1): JavaScript and TypeScript runs
	// and sessions take them, since Node cannot be forked from a zygote.
	// The daemon drops it when the rootfs has no Node.js.
	NodeSize int
	Extra    []PoolProfileConfig
}

// PoolProfileConfig is one [pools.NAME] table.
type PoolProfileConfig struct {
	Name      string
	Rootfs    string          // default: default_rootfs
	Size      int             // default 1
	Preimport []string        //
	Limits    agentapi.Limits // unset: default_limits; timeout and output are per run
	// Language is "python" (empty) or "javascript" (Node runners, which
	// serve TypeScript too).
	Language string
}

// limits resolves the pool's limits over the daemon's defaults d: timeout
// and output are per run, so always d's.
func (pp PoolProfileConfig) limits(d container.Limits) container.Limits {
	return limits.FromWire(pp.Limits).Sandbox().Or(d)
}

func defaultPoolConfig() PoolConfig {
	return PoolConfig{Size: -1, Refills: 1, SpareInits: 1, NodeSize: 1}
}

// nodePoolName names the built-in pool of Node runners.
const nodePoolName = "node"

// defaultPoolSize sizes the default pool for the host: one runner per core,
// at least two.
func defaultPoolSize() int { return max(2, runtime.NumCPU()) }

// extraPool returns the [pools.NAME] entry, adding it if needed. The
// pointer is valid until the next call.
func (pc *PoolConfig) extraPool(name string) *PoolProfileConfig {
	for i := range pc.Extra {
		if pc.Extra[i].Name == name {
			return &pc.Extra[i]
		}
	}
	pc.Extra = append(pc.Extra, PoolProfileConfig{Name: name, Size: 1})
	return &pc.Extra[len(pc.Extra)-1]
}

// setPoolKey stores a key of [pool] or [pools.NAME].
func (cfg *Config) setPoolKey(key []string, v *unstable.Node) error {
	switch {
	case len(key) == 2 && key[0] == "pool":
		switch key[1] {
		case "size":
			n, err := tomlval.IntIn(v, 0, 1024, "(no pool)")
			if err != nil {
				return err
			}
			cfg.Pool.Size = int(n)
		case "refills":
			n, err := tomlval.IntIn(v, 1, 64, "")
			if err != nil {
				return err
			}
			cfg.Pool.Refills = int(n)
		case "preimport":
			l, err := tomlModules(v)
			if err != nil {
				return err
			}
			cfg.Pool.Preimport = l
		case "spare_inits":
			n, err := tomlval.IntIn(v, 0, 64, "")
			if err != nil {
				return err
			}
			cfg.Pool.SpareInits = int(n)
		case "node_size":
			n, err := tomlval.IntIn(v, 0, 1024, "(no Node pool)")
			if err != nil {
				return err
			}
			cfg.Pool.NodeSize = int(n)
		default:
			return fmt.Errorf("unknown key; [pool] has size, refills, preimport, spare_inits and node_size")
		}
		return nil
	case len(key) == 3 && key[0] == "pools":
		if key[1] == defaultPoolName || key[1] == nodePoolName {
			return fmt.Errorf("the %s pool is configured in [pool]", key[1])
		}
		if msg := profileNameError(key[1]); msg != "" {
			return fmt.Errorf("pool %s", msg)
		}
		pp := cfg.Pool.extraPool(key[1])
		switch key[2] {
		case "rootfs":
			s, err := tomlval.String(v)
			if err != nil {
				return err
			}
			if err := rootfs.ValidName(s); err != nil {
				return err
			}
			pp.Rootfs = s
		case "size":
			n, err := tomlval.IntIn(v, 0, 1024, "")
			if err != nil {
				return err
			}
			pp.Size = int(n)
		case "preimport":
			l, err := tomlModules(v)
			if err != nil {
				return err
			}
			pp.Preimport = l
		case "language":
			s, err := tomlval.String(v)
			if err != nil {
				return err
			}
			if _, ok := lang.Pooled(s); !ok {
				return fmt.Errorf("%q: %s (a runner serves the languages it transforms too: javascript runners serve typescript)", s, strings.Join(lang.PooledNames(), " or "))
			}
			pp.Language = s
		case "memory", "pids", "cpus", "disk":
			return setLimit(&pp.Limits, key[2], v)
		case "timeout", "output":
			return fmt.Errorf("%s is per run, not part of a pool; leave it out", key[2])
		default:
			return fmt.Errorf("unknown key; [pools.NAME] has rootfs, language, size, preimport, memory, pids, cpus and disk")
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
	out, err := tomlval.Strings(v, `["numpy", "pandas"]`)
	if err != nil {
		return nil, err
	}
	for _, m := range out {
		if m == "" || strings.Trim(m, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.") != "" {
			return nil, fmt.Errorf("%q is not a Python module name", m)
		}
	}
	return out, nil
}

// checkPool finds what is wrong with the pool settings.
func (cfg *Config) checkPool(bad func(key, format string, args ...any)) {
	if cfg.Pool.Size < -1 {
		bad("pool.size", "%d: must not be negative (0: no pool)", cfg.Pool.Size)
	}
	if cfg.Pool.SpareInits < 0 || cfg.Pool.SpareInits > 64 {
		bad("pool.spare_inits", "%d: must be between 0 and 64", cfg.Pool.SpareInits)
	}
	if cfg.Pool.Refills < 1 {
		bad("pool.refills", "%d: must be at least 1", cfg.Pool.Refills)
	}
	d, m := cfg.Limits()
	for _, pp := range cfg.Pool.Extra {
		for _, f := range limitFields(pp.limits(d), m) {
			if f.a > f.b {
				bad("pools."+pp.Name+"."+f.key, "%s is above the maximum %s (max_limits.%s)", f.show(f.a), f.show(f.b), f.key)
			}
		}
	}
}

// PoolProfiles are the pools to keep: the default one (unless its size is
// 0) and every [pools.NAME] with a size.
func (cfg Config) PoolProfiles() []pool.Profile {
	d, _ := cfg.Limits()
	var out []pool.Profile
	size := cfg.Pool.Size
	if size < 0 {
		size = defaultPoolSize()
	}
	if size > 0 {
		out = append(out, pool.Profile{Name: defaultPoolName, Rootfs: cfg.DefaultRootfs, Limits: d, Preimport: cfg.Pool.Preimport, Size: size})
	}
	if cfg.Pool.NodeSize > 0 {
		out = append(out, pool.Profile{Name: nodePoolName, Rootfs: cfg.DefaultRootfs, Limits: d, Size: cfg.Pool.NodeSize, Language: lang.BuiltinPool(nodePoolName).Runner})
	}
	for _, pp := range cfg.Pool.Extra {
		if pp.Size == 0 {
			continue
		}
		r := pp.Rootfs
		if r == "" {
			r = cfg.DefaultRootfs
		}
		kind := lang.Default().Runner
		if l, ok := lang.Pooled(pp.Language); ok {
			kind = l.Runner
		}
		out = append(out, pool.Profile{Name: pp.Name, Rootfs: r, Limits: pp.limits(d), Preimport: slices.Clone(pp.Preimport), Size: pp.Size, Language: kind})
	}
	return out
}

// String summarises the pool settings (restart-only on reload).
func (pc PoolConfig) String() string {
	return fmt.Sprintf("%+v", pc.Extra) + fmt.Sprint(pc.Size, pc.Refills, pc.SpareInits, pc.Preimport, pc.NodeSize)
}
