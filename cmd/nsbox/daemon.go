package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/agentapi/server"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/pool"
	"github.com/nsbox/nsbox/container/runner"
	"github.com/nsbox/nsbox/container/zygote"
	"github.com/nsbox/nsbox/daemon"
	"github.com/nsbox/nsbox/daemon/config"
	"github.com/nsbox/nsbox/rootfs"
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
			&cli.StringFlag{Name: "config", Usage: "TOML config file (e.g. /etc/nsbox/nsbox.conf)", EnvVars: env("CONFIG")},
			&cli.BoolFlag{Name: "check-config", Usage: "check the configuration, print every error with its line, and exit"},
			&cli.StringFlag{Name: "socket", Usage: "Unix socket to serve (default /run/nsbox/nsbox.sock)", EnvVars: env("SOCKET")},
			&cli.StringFlag{Name: "state-dir", Usage: "persistent state (default /var/lib/nsbox)", EnvVars: env("STATE_DIR")},
			&cli.StringFlag{Name: "run-dir", Usage: "per-run state: workspaces, locks (default /run/nsbox)", EnvVars: env("RUN_DIR")},
			&cli.StringFlag{Name: "rootfs-store", Usage: "rootfs store (default STATE_DIR/rootfs)", EnvVars: env("ROOTFS_STORE")},
			&cli.StringFlag{Name: "default-rootfs", Usage: "rootfs of requests that name none (default \"default\")", EnvVars: env("DEFAULT_ROOTFS")},
			&cli.IntFlag{Name: "max-concurrent", Usage: "runs at once (default: number of CPUs)", EnvVars: env("MAX_CONCURRENT")},
			&cli.IntFlag{Name: "queue", Usage: "runs waiting for a slot before 429 (default 2*max-concurrent)", EnvVars: env("QUEUE")},
			&cli.IntFlag{Name: "max-sessions", Usage: "live Python sessions at most (default 16)", EnvVars: env("MAX_SESSIONS")},
			&cli.DurationFlag{Name: "session-idle-timeout", Usage: "default idle time before a session ends (default 15m)", EnvVars: env("SESSION_IDLE_TIMEOUT")},
			&cli.DurationFlag{Name: "session-max-lifetime", Usage: "longest life of a session, idle or not (default 24h)", EnvVars: env("SESSION_MAX_LIFETIME")},
			&cli.DurationFlag{Name: "shutdown-grace", Usage: "how long runs may finish on SIGTERM before they are killed (default 30s)", EnvVars: env("SHUTDOWN_GRACE")},
			&cli.StringFlag{Name: "log-format", Usage: "json or text (default text)", EnvVars: env("LOG_FORMAT")},
			&cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error (default info)", EnvVars: env("LOG_LEVEL")},
			&cli.StringFlag{Name: "metrics-listen", Usage: "also serve /metrics on this loopback TCP address (127.0.0.1:PORT)", EnvVars: env("METRICS_LISTEN")},
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
	for _, w := range cfg.Warnings() {
		log.Warn("config: " + w.Format(cfg.File))
	}

	ln, lock, activated, err := daemonListener(cfg.Socket)
	if err != nil {
		return err
	}
	if lock != nil {
		defer lock.Close()
	}
	defer ln.Close()

	eng, err := container.New(container.Config{RunDir: cfg.RunDir, CgroupName: cfg.CgroupName, Spares: cfg.Pool.SpareInits, Logger: log.With("component", "engine")})
	if err != nil {
		return fmt.Errorf("sandbox engine: %w", err)
	}
	defer eng.Close()
	n, err := eng.Recover()
	if err != nil {
		return fmt.Errorf("recovering what a previous daemon left: %w", err)
	}
	log.Info("recovered leftovers of a previous daemon", "removed", n)

	store := daemon.Store{Store: rootfs.Store{Root: cfg.RootfsStore}}
	dcfg := daemon.Config{
		Runner:        eng,
		Starter:       eng,
		Rootfs:        store,
		Logger:        log,
		MaxConcurrent: cfg.MaxConcurrent,
		Policy:        cfg.Policy(),
		Version:       version,
		CgroupMode:    string(eng.CgroupMode()),
	}
	if cfg.Queue != nil {
		dcfg.QueueSize, dcfg.NoQueue = *cfg.Queue, *cfg.Queue == 0
	}
	// Python runs, sessions and pool refills on a rootfs with a zygote are
	// forked from it; everything else (and everything while it is down)
	// starts on the engine.
	if profiles := cfg.ZygoteProfiles(); len(profiles) > 0 {
		zs, err := zygote.New(zygote.Config{Engine: eng, Acquire: store.Acquire, Profiles: profiles, Env: runner.ZygoteEnv(), Prelude: runner.ZygotePrelude(), Logger: log.With("component", "zygote")})
		if err != nil {
			return fmt.Errorf("zygotes: %w", err)
		}
		// After the pool and the core are done, before the engine.
		defer zs.Close()
		dcfg.Runner, dcfg.Starter, dcfg.Zygotes = zs, zs, zs
		for _, p := range profiles {
			log.Info("zygote", "rootfs", p.Rootfs, "modules", strings.Join(p.Modules, ","), "children", p.Children, "huge_pages", p.HugePages)
		}
	}
	var pl *pool.Pool
	if profiles := cfg.PoolProfiles(); len(profiles) > 0 {
		pl, err = pool.New(pool.Config{Starter: dcfg.Starter, Acquire: store.Acquire, Profiles: profiles, Refills: cfg.Pool.Refills, Logger: log.With("component", "pool")})
		if err != nil {
			return fmt.Errorf("warm pool: %w", err)
		}
		// After the core has closed (sessions included), before the
		// engine closes.
		defer pl.Close()
		dcfg.Pool = pl
	}
	core, err := daemon.New(dcfg)
	if err != nil {
		return err
	}
	defer core.Close()
	info, err := core.Info()
	if err != nil {
		return err
	}
	// Every run slot and queue place, plus room for health, info, metrics
	// and fast 429 answers.
	srv, err := server.New(server.Config{Core: core, Logger: log, ShutdownGrace: cfg.ShutdownGrace,
		MaxConns: max(1024, info.MaxConcurrent+info.QueueSize+64)})
	if err != nil {
		return err
	}
	if pl != nil {
		pl.Start(core.Saturated)
		for _, p := range pl.Stats() {
			log.Info("warm pool", "pool", p.Name, "rootfs", p.Rootfs, "size", p.Size, "preimport", strings.Join(p.Preimport, ","),
				"memory", p.Limits.MemoryBytes, "pids", p.Limits.Pids, "cpus", p.Limits.CPUs, "disk", p.Limits.DiskBytes)
		}
	}

	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if cfg.MetricsListen != "" {
		mln, err := listenMetrics(cfg.MetricsListen)
		if err != nil {
			return err
		}
		ms := &http.Server{Handler: srv.MetricsHandler(), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := ms.Serve(mln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics listener", "err", err)
			}
		}()
		defer ms.Close()
		log.Info("serving metrics", "addr", mln.Addr().String())
	}

	addr := ln.Addr().String()
	apply := func(next config.Config) error { return core.Reconfigure(next.Policy()) }
	rl := &reloader{c: c, started: cfg, apply: apply, level: level, log: log, status: "serving on " + addr}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go rl.loop(ctx, hup)
	go func() {
		<-ctx.Done()
		sdNotify(log, "STOPPING=1\nSTATUS=draining runs")
	}()

	log.Info("serving", "socket", addr, "socket_activated", activated, "config", cfg.File, "version", version,
		"max_concurrent", cfg.MaxConcurrent, "rootfs_store", cfg.RootfsStore, "run_dir", cfg.RunDir, "cgroup", cfg.CgroupName, "pid", os.Getpid())
	sdNotify(log, "READY=1\nSTATUS="+rl.status)
	return srv.Run(ctx, ln)
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

// listenMetrics listens on addr, which must be a loopback address: metrics
// are for the host, never the network.
func listenMetrics(addr string) (net.Listener, error) {
	if err := config.CheckMetricsAddr(addr); err != nil {
		return nil, fmt.Errorf("metrics-listen %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics-listen: %w", err)
	}
	return ln, nil
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
