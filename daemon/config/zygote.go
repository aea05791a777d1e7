package config

import (
	"fmt"
	"slices"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/zygote"
	"github.com/nsbox/nsbox/daemon/config/internal/tomlval"
	"github.com/nsbox/nsbox/rootfs"
)

// ZygoteConfig is [zygote]: which rootfs get a zygote (a pre-imported
// interpreter whose children serve Python runs and sessions) and what it
// imports.
type ZygoteConfig struct {
	Enabled bool
	Rootfs  []string // nil: the default rootfs and every pool's
	Modules []string // nil: zygote.DefaultModules()
	// LeanModules are a second, smaller zygote's on each rootfs (Profile.Lean).
	// nil: zygote.DefaultLeanModules() while Modules is nil too, else none.
	LeanModules []string
	Children    int
	MemoryBytes int64
	HugePages   bool
	// Bare: a rootfs with none of the modules gets a bare zygote (the
	// interpreter and the runner, compiled) rather than none.
	Bare bool
}

func defaultZygoteConfig() ZygoteConfig {
	return ZygoteConfig{Enabled: true, Children: 64, MemoryBytes: 2 << 30, HugePages: true, Bare: true}
}

// setZygoteKey stores a key of [zygote].
func (cfg *Config) setZygoteKey(key string, v *unstable.Node) error {
	z := &cfg.Zygote
	switch key {
	case "enabled", "huge_pages", "bare":
		if v.Kind != unstable.Bool {
			return fmt.Errorf("want true or false, got a TOML %s", tomlval.KindName(v.Kind))
		}
		*map[string]*bool{"enabled": &z.Enabled, "huge_pages": &z.HugePages, "bare": &z.Bare}[key] = string(v.Data) == "true"
	case "rootfs":
		l, err := tomlModules(v)
		if err != nil {
			return err
		}
		for _, r := range l {
			if err := rootfs.ValidName(r); err != nil {
				return err
			}
		}
		z.Rootfs = l
	case "modules", "lean_modules":
		l, err := tomlModules(v)
		if err != nil {
			return err
		}
		if key == "modules" {
			z.Modules = l
		} else {
			z.LeanModules = append([]string{}, l...) // [] (none) is not nil (the default)
		}
	case "children":
		n, err := tomlval.IntIn(v, 1, container.MaxZygoteChildren, "")
		if err != nil {
			return err
		}
		z.Children = int(n)
	case "memory":
		n, err := tomlval.Size(v)
		if err != nil {
			return err
		}
		if n < 64<<20 {
			return fmt.Errorf("%d bytes: a zygote needs at least 64 MiB", n)
		}
		z.MemoryBytes = n
	default:
		return fmt.Errorf("unknown key; [zygote] has enabled, rootfs, modules, lean_modules, children, memory, huge_pages and bare")
	}
	return nil
}

// ZygoteProfiles lists the zygotes to run: one per rootfs named in
// [zygote] rootfs, or else per rootfs the default pool and [pools.NAME]
// use (the default rootfs at least).
func (cfg Config) ZygoteProfiles() []zygote.Profile {
	if !cfg.Zygote.Enabled {
		return nil
	}
	names := cfg.Zygote.Rootfs
	if names == nil {
		names = []string{cfg.DefaultRootfs}
		for _, pp := range cfg.Pool.Extra {
			if pp.Rootfs != "" && !slices.Contains(names, pp.Rootfs) {
				names = append(names, pp.Rootfs)
			}
		}
	}
	modules, lean := cfg.Zygote.Modules, cfg.Zygote.LeanModules
	if modules == nil {
		modules = zygote.DefaultModules()
		if lean == nil {
			lean = zygote.DefaultLeanModules()
		}
	}
	// A lean zygote that would import what the main one does is none.
	if a, b := slices.Sorted(slices.Values(lean)), slices.Sorted(slices.Values(modules)); slices.Equal(slices.Compact(a), slices.Compact(b)) {
		lean = nil
	}
	var out []zygote.Profile
	for _, n := range names {
		p := zygote.Profile{Rootfs: n, Modules: slices.Clone(modules), Children: cfg.Zygote.Children,
			MemoryBytes: cfg.Zygote.MemoryBytes, HugePages: cfg.Zygote.HugePages, Bare: cfg.Zygote.Bare}
		out = append(out, p)
		if len(lean) > 0 {
			p.Modules, p.Bare, p.Lean = slices.Clone(lean), false, true
			out = append(out, p)
		}
	}
	return out
}

// String summarises the settings (restart-only on reload).
func (z ZygoteConfig) String() string {
	return fmt.Sprint(z.Enabled, z.Rootfs, z.Modules, z.LeanModules, z.Children, z.MemoryBytes, z.HugePages, z.Bare)
}
