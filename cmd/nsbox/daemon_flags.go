package main

import (
	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/daemon/config"
)

// flagKeys maps each daemon flag that sets a configuration key (and its
// NSBOX_* environment variable, which the flag takes in) to that key.
var flagKeys = []struct{ flag, key string }{
	{"socket", "socket"}, {"state-dir", "state_dir"}, {"run-dir", "run_dir"}, {"rootfs-store", "rootfs_store"},
	{"default-rootfs", "default_rootfs"}, {"log-format", "log_format"}, {"log-level", "log_level"},
	{"metrics-listen", "metrics_listen"}, {"cgroup-name", "cgroup_name"},
	{"e2b-listen", "e2b.listen"}, {"e2b-keys", "e2b.keys_file"},
	{"max-concurrent", "max_concurrent"}, {"queue", "queue"}, {"shutdown-grace", "shutdown_grace"},
	{"max-sessions", "sessions.max"}, {"session-idle-timeout", "sessions.idle_timeout"}, {"session-max-lifetime", "sessions.max_lifetime"},
	{"session-idle-action", "sessions.idle_action"},
	{"pool-size", "pool.size"}, {"pool-refills", "pool.refills"}, {"spare-inits", "pool.spare_inits"}, {"pool-preimport", "pool.preimport"},
	{"pool-node-size", "pool.node_size"},
	{"zygote", "zygote.enabled"}, {"zygote-bare", "zygote.bare"},
}

// overridesFrom lists the configuration keys the command line and the
// environment set, for config.Load.
func overridesFrom(c *cli.Context) []config.Override {
	var out []config.Override
	for _, f := range flagKeys {
		if c.IsSet(f.flag) {
			out = append(out, config.Override{Key: f.key, Value: c.Value(f.flag)})
		}
	}
	return out
}

// loadConfig loads the daemon's configuration as --config and the flags
// say.
func loadConfig(c *cli.Context) (config.Config, error) {
	return config.Load(c.String("config"), overridesFrom(c))
}

func poolFlags() []cli.Flag {
	env := func(name string) []string { return []string{"NSBOX_" + name} }
	return []cli.Flag{
		&cli.IntFlag{Name: "pool-size", Usage: "`N` warm Python runners kept ready for the default rootfs and limits (0: no pool)", DefaultText: "max(2, CPUs)", EnvVars: env("POOL_SIZE")},
		&cli.StringFlag{Name: "pool-preimport", Usage: "`MODULES` the default pool imports ahead of time, comma-separated (e.g. numpy,pandas,matplotlib)", EnvVars: env("POOL_PREIMPORT")},
		&cli.IntFlag{Name: "pool-refills", Usage: "`N` pooled runners of one pool started at once: the pool's CPU budget", DefaultText: "1", EnvVars: env("POOL_REFILLS")},
		&cli.IntFlag{Name: "pool-node-size", Usage: "`N` warm Node.js runners kept ready for JavaScript and TypeScript on the default rootfs, when it has Node.js (0: none)", DefaultText: "1", EnvVars: env("POOL_NODE_SIZE")},
		&cli.IntFlag{Name: "spare-inits", Usage: "`N` sandbox inits kept cloned and placed in their cgroups ahead of time, for any run (0: none)", DefaultText: "1", EnvVars: env("SPARE_INITS")},
	}
}

func zygoteFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "zygote", Value: true, Usage: "fork Python runs and sessions from a zygote: pre-imported on rootfs that have the data-science stack, bare on others (--zygote=false: start every interpreter cold)", EnvVars: []string{"NSBOX_ZYGOTE"}},
		&cli.BoolFlag{Name: "zygote-bare", Value: true, Usage: "give a rootfs without the data-science stack a bare zygote (the interpreter and the runner, compiled); false: none there", EnvVars: []string{"NSBOX_ZYGOTE_BARE"}},
	}
}
