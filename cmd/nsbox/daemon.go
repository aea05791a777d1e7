package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/agentapi/server"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/rootfs"
	"github.com/urfave/cli/v2"
)

func daemonCommand() *cli.Command {
	env := func(name string) []string { return []string{"NSBOX_" + name} }
	return &cli.Command{
		Name:  "daemon",
		Usage: "serve the nsbox API on a Unix socket",
		Description: "Settings come from built-in defaults, then --config (JSON), then NSBOX_* environment\n" +
			"variables, then flags; see docs/API.md.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Usage: "JSON config file", EnvVars: env("CONFIG")},
			&cli.StringFlag{Name: "socket", Usage: "Unix socket to serve (default /run/nsbox/nsbox.sock)", EnvVars: env("SOCKET")},
			&cli.StringFlag{Name: "state-dir", Usage: "persistent state (default /var/lib/nsbox)", EnvVars: env("STATE_DIR")},
			&cli.StringFlag{Name: "run-dir", Usage: "per-run state: workspaces, locks (default /run/nsbox)", EnvVars: env("RUN_DIR")},
			&cli.StringFlag{Name: "rootfs-store", Usage: "rootfs store (default STATE_DIR/rootfs)", EnvVars: env("ROOTFS_STORE")},
			&cli.StringFlag{Name: "default-rootfs", Usage: "rootfs of requests that name none (default \"default\")", EnvVars: env("DEFAULT_ROOTFS")},
			&cli.IntFlag{Name: "max-concurrent", Usage: "runs at once (default: number of CPUs)", EnvVars: env("MAX_CONCURRENT")},
			&cli.IntFlag{Name: "queue", Usage: "runs waiting for a slot before 429 (default 2*max-concurrent)", EnvVars: env("QUEUE")},
			&cli.DurationFlag{Name: "shutdown-grace", Usage: "how long runs may finish on SIGTERM before they are killed (default 30s)", EnvVars: env("SHUTDOWN_GRACE")},
			&cli.StringFlag{Name: "log-format", Usage: "json or text (default text)", EnvVars: env("LOG_FORMAT")},
			&cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error (default info)", EnvVars: env("LOG_LEVEL")},
			&cli.StringFlag{Name: "metrics-listen", Usage: "also serve /metrics on this loopback TCP address (127.0.0.1:PORT)", EnvVars: env("METRICS_LISTEN")},
			&cli.StringFlag{Name: "cgroup-name", Hidden: true, EnvVars: env("CGROUP_NAME")},
		},
		Action: runDaemon,
	}
}

func runDaemon(c *cli.Context) error {
	cfg, err := loadDaemonConfig(c)
	if err != nil {
		return err
	}
	log, err := newLogger(cfg)
	if err != nil {
		return err
	}
	slog.SetDefault(log)

	ln, lock, err := listenSocket(cfg.Socket)
	if err != nil {
		return err
	}
	defer lock.Close()
	defer ln.Close()

	eng, err := container.New(container.Config{RunDir: cfg.RunDir, CgroupName: cfg.CgroupName, Logger: log.With("component", "engine")})
	if err != nil {
		return fmt.Errorf("sandbox engine: %w", err)
	}
	defer eng.Close()
	n, err := eng.Recover()
	if err != nil {
		return fmt.Errorf("recovering what a previous daemon left: %w", err)
	}
	log.Info("recovered leftovers of a previous daemon", "removed", n)

	scfg := server.Config{
		Runner:        eng,
		Rootfs:        rootfsStore{store: rootfs.Store{Root: cfg.RootfsStore}},
		Logger:        log,
		MaxConcurrent: cfg.MaxConcurrent,
		DefaultRootfs: cfg.DefaultRootfs,
		DefaultLimits: engineLimits(cfg.DefaultLimits),
		MaxLimits:     engineLimits(cfg.MaxLimits),
		ShutdownGrace: time.Duration(cfg.ShutdownGrace),
		Version:       version,
		CgroupMode:    string(eng.CgroupMode()),
	}
	if cfg.Queue != nil {
		scfg.QueueSize, scfg.NoQueue = *cfg.Queue, *cfg.Queue == 0
	}
	srv, err := server.New(scfg)
	if err != nil {
		return err
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

	log.Info("serving", "socket", cfg.Socket, "version", version, "max_concurrent", cfg.MaxConcurrent,
		"rootfs_store", cfg.RootfsStore, "run_dir", cfg.RunDir, "cgroup", cfg.CgroupName, "pid", os.Getpid())
	return srv.Run(ctx, ln)
}

// listenMetrics listens on addr, which must be a loopback address: metrics
// are for the host, never the network.
func listenMetrics(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("metrics-listen %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("metrics-listen %q: only loopback addresses (127.0.0.1, ::1, localhost) are allowed", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics-listen: %w", err)
	}
	return ln, nil
}

func newLogger(cfg daemonConfig) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return nil, fmt.Errorf("log-level %q: use debug, info, warn or error", cfg.LogLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
}
