package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/daemon/config"
	"github.com/nsbox/nsbox/daemon/service"
)

func daemonCommand() *cli.Command {
	env := func(name string) []string { return []string{"NSBOX_" + name} }
	return &cli.Command{
		Name:  "daemon",
		Usage: "serve the nsbox API on a Unix socket",
		Description: "Settings come from built-in defaults, then --config (TOML, see scripts/nsbox.conf.example),\n" +
			"then NSBOX_* environment variables, then flags; see docs/OPERATIONS.md. Under systemd the\n" +
			"daemon takes its socket from socket activation (LISTEN_FDS) and reports readiness (sd_notify).\n" +
			"SIGHUP re-reads the configuration and applies what can change live.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "config", Usage: "TOML config `FILE` (e.g. /etc/nsbox/nsbox.conf)", EnvVars: env("CONFIG")},
			&cli.BoolFlag{Name: "check-config", Usage: "check the configuration, print every error with its line, and exit"},
			&cli.StringFlag{Name: "socket", Usage: "serve the Unix socket `PATH`", DefaultText: "/run/nsbox/nsbox.sock", EnvVars: env("SOCKET")},
			&cli.StringFlag{Name: "state-dir", Usage: "persistent state in `DIR`", DefaultText: "/var/lib/nsbox", EnvVars: env("STATE_DIR")},
			&cli.StringFlag{Name: "run-dir", Usage: "per-run state in `DIR`: workspaces, locks", DefaultText: "/run/nsbox", EnvVars: env("RUN_DIR")},
			&cli.StringFlag{Name: "rootfs-store", Usage: "the rootfs store `DIR`", DefaultText: "STATE_DIR/rootfs", EnvVars: env("ROOTFS_STORE")},
			&cli.StringFlag{Name: "default-rootfs", Usage: "rootfs `NAME` of requests that name none", DefaultText: "\"default\"", EnvVars: env("DEFAULT_ROOTFS")},
			&cli.IntFlag{Name: "max-concurrent", Usage: "`N` runs at once", DefaultText: "number of CPUs", EnvVars: env("MAX_CONCURRENT")},
			&cli.IntFlag{Name: "queue", Usage: "`N` runs waiting for a slot before 429", DefaultText: "2*max-concurrent", EnvVars: env("QUEUE")},
			&cli.IntFlag{Name: "max-sessions", Usage: "`N` live sessions at most", DefaultText: "16", EnvVars: env("MAX_SESSIONS")},
			&cli.DurationFlag{Name: "session-idle-timeout", Usage: "a session ends after `DURATION` idle, unless it asks otherwise", DefaultText: "15m", EnvVars: env("SESSION_IDLE_TIMEOUT")},
			&cli.DurationFlag{Name: "session-max-lifetime", Usage: "longest life of a session, idle or not: `DURATION`", DefaultText: "24h", EnvVars: env("SESSION_MAX_LIFETIME")},
			&cli.StringFlag{Name: "session-idle-action", Usage: "what a session's idle timeout does, `ACTION`: end or pause (it then lives until its lifetime ends)", DefaultText: "end", EnvVars: env("SESSION_IDLE_ACTION")},
			&cli.DurationFlag{Name: "shutdown-grace", Usage: "at SIGTERM runs may finish for `DURATION`, then they are killed", DefaultText: "30s", EnvVars: env("SHUTDOWN_GRACE")},
			&cli.StringFlag{Name: "log-format", Usage: "log `FORMAT`: json or text", DefaultText: "text", EnvVars: env("LOG_FORMAT")},
			&cli.StringFlag{Name: "log-level", Usage: "log `LEVEL`: debug, info, warn or error", DefaultText: "info", EnvVars: env("LOG_LEVEL")},
			&cli.StringFlag{Name: "metrics-listen", Usage: "also serve /metrics on the loopback TCP address `ADDR` (127.0.0.1:PORT)", EnvVars: env("METRICS_LISTEN")},
			&cli.StringFlag{Name: "e2b-listen", Usage: "serve the E2B-compatible endpoint on the TCP address `ADDR` (127.0.0.1:49999; docs/E2B.md)", EnvVars: env("E2B_LISTEN")},
			&cli.StringFlag{Name: "e2b-keys", Usage: "the E2B endpoint's API keys in `FILE`: root-owned, mode 0600, one e2b_HEX key per line", EnvVars: env("E2B_KEYS")},
			&cli.StringFlag{Name: "cgroup-name", Hidden: true, EnvVars: env("CGROUP_NAME")},
		}, append(poolFlags(), zygoteFlags()...)...),
		Action: runDaemon,
	}
}

func runDaemon(c *cli.Context) error {
	cfg, err := loadConfig(c)
	if c.Bool("check-config") {
		return reportConfig(c, cfg, err)
	}
	if err != nil {
		return err
	}
	level := new(slog.LevelVar)
	log := newLogger(cfg, level)
	slog.SetDefault(log)
	return service.Run(c.Context, cfg, service.Options{
		Version: version,
		Logger:  log,
		Level:   level,
		Reload:  func() (config.Config, error) { return loadConfig(c) },
	})
}

// reportConfig is --check-config: print every error (FILE:LINE: key: msg)
// or "configuration OK", and exit 1 on errors.
func reportConfig(c *cli.Context, cfg config.Config, err error) error {
	var ce *config.Errors
	if errors.As(err, &ce) {
		for _, e := range ce.Errs {
			fmt.Fprintln(c.App.ErrWriter, e.Format(ce.File))
		}
		return &exitError{code: 1, err: fmt.Errorf("%d error(s) in the configuration", len(ce.Errs))}
	}
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(c.App.ErrWriter, "warning: "+w.Format(cfg.File))
	}
	src := cfg.File
	if src == "" {
		src = "built-in defaults, flags and environment (no --config)"
	}
	fmt.Fprintf(c.App.Writer, "configuration OK: %s\n", src)
	return nil
}

// newLogger logs to stderr (the journal under systemd) at the level in
// level, which a reload may change.
func newLogger(cfg config.Config, level *slog.LevelVar) *slog.Logger {
	level.Set(cfg.Level())
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
