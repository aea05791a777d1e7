// Package service is the nsbox daemon as a service: it wires the engine,
// the zygotes, the warm pool, the core (package daemon) and the HTTP
// transport (agentapi/server), and runs them until its context ends. It
// also owns what the daemon does as a process under systemd: socket
// activation, the socket's lock, sd_notify, the metrics listener and
// SIGHUP reloads.
//
// Package daemon cannot do this itself: agentapi/server imports it.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/httpkit"
	"github.com/nsbox/nsbox/agentapi/server"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/pool"
	"github.com/nsbox/nsbox/container/runner"
	"github.com/nsbox/nsbox/container/sandboxinit"
	"github.com/nsbox/nsbox/container/zygote"
	"github.com/nsbox/nsbox/daemon"
	"github.com/nsbox/nsbox/daemon/config"
	"github.com/nsbox/nsbox/daemon/volume"
	"github.com/nsbox/nsbox/rootfs"
)

// Options is what Run needs beside the configuration.
type Options struct {
	// Version is the daemon's version, reported by Info and logged.
	Version string
	// Logger logs everything the daemon does; nil: slog.Default().
	Logger *slog.Logger
	// Level is Logger's level, which a reload sets; nil: reloads leave
	// the level alone.
	Level *slog.LevelVar
	// Reload loads the configuration again (file, environment, flags) on
	// SIGHUP. Required.
	Reload func() (config.Config, error)
}

// defaultSoftMemoryLimit is the Go runtime's soft memory limit for a
// daemon with the default budgets: the body budget (2 x 64 MiB) with room
// for their decoded copies.
const defaultSoftMemoryLimit = 384 << 20

// softMemoryLimit is the soft memory limit for budgets b: the default,
// plus what docs/OPERATIONS.md's sizing says larger budgets may add (1.5
// times the result budget's excess, 2.5 times the body budget's), so that
// a daemon whose operator raised them is not held to the default's heap
// by a collector running without pause. Smaller budgets keep the default.
func softMemoryLimit(b config.BudgetsConfig) int64 {
	extra := 3*max(0, b.ResultBytes-config.DefaultResultBudget)/2 + 5*max(0, b.BodyBytes-config.DefaultBodyBudget)/2
	return defaultSoftMemoryLimit + extra
}

// Run serves the nsbox API as cfg says until ctx ends or the process gets
// SIGTERM or SIGINT, then drains the runs in flight (cfg.ShutdownGrace)
// and closes everything it started. SIGHUP applies opts.Reload's
// configuration live. Run returns when the daemon has stopped.
func Run(ctx context.Context, cfg config.Config, opts Options) error {
	if opts.Reload == nil {
		return errors.New("service: no Reload")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	// A log pipe whose reader goes away (`nsbox daemon 2>&1 | head`, a log
	// shipper restarting) must not kill the daemon: by default Go exits
	// with SIGPIPE on a write to a broken stdout or stderr. Notify, not
	// Ignore: an ignored SIGPIPE would be inherited through exec by every
	// sandbox; a handler is reset there. The logger drops the EPIPE.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	for _, w := range cfg.Warnings() {
		log.Warn("config: " + w.Format(cfg.File))
	}
	// The daemon's own heap is small; what grows it is request bodies
	// (bounded by the server's body budget) and their decoded copies. A
	// soft limit makes the collector work harder before the heap passes
	// it, instead of letting it double; GOMEMLIMIT overrides it.
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(softMemoryLimit(cfg.Budgets))
	}

	if err := checkDefaultRootfs(rootfs.Store{Root: cfg.RootfsStore}, cfg.DefaultRootfs); err != nil {
		return err
	}
	ln, lock, activated, err := daemonListener(cfg.Socket)
	if err != nil {
		return err
	}
	if lock != nil {
		defer lock.Close()
	}
	defer ln.Close()
	if dir := filepath.Dir(cfg.Socket); dir == filepath.Clean(cfg.RunDir) {
		// A root `nsbox exec` before the daemon's first start may have made
		// the run dir 0700; the socket's users must be able to reach it.
		if changed, err := searchable(dir); err != nil {
			return fmt.Errorf("socket directory: %w", err)
		} else if changed {
			log.Info("made the socket's directory searchable for the socket's group and others", "dir", dir)
		}
	}

	eng, err := container.New(container.Config{RunDir: cfg.RunDir, CgroupName: cfg.CgroupName, Spares: cfg.Pool.SpareInits, Landlock: cfg.Security.Landlock, Logger: log.With("component", "engine")})
	if err != nil {
		return fmt.Errorf("sandbox engine: %w", err)
	}
	defer eng.Close()
	n, err := eng.Recover()
	if err != nil {
		return fmt.Errorf("recovering what a previous daemon left: %w", err)
	}
	log.Info("recovered leftovers of a previous daemon", "removed", n)
	// Mounted now that no sandbox of a previous daemon is left; unmounted
	// after every sandbox (core, pool, zygotes) is gone.
	vols, err := volume.OpenOwned(cfg.StateDir, cfg.RunDir, cfg.Volumes.OwnerID, log.With("component", "volumes"))
	if err != nil {
		return err
	}
	defer func() {
		if err := vols.Close(); err != nil {
			log.Error("unmount volumes", "err", err)
		}
	}()
	log.Info("volumes", "mounted", len(vols.Names()), "datasets", len(cfg.Datasets))

	store := daemon.Store{Store: rootfs.Store{Root: cfg.RootfsStore}}
	dcfg := daemon.Config{
		Engine:        eng,
		Starter:       eng,
		Rootfs:        store,
		Logger:        log,
		MaxConcurrent: cfg.MaxConcurrent,
		ResultBytes:   cfg.Budgets.ResultBytes,
		Policy:        cfg.Policy(),
		Version:       opts.Version,
		CgroupMode:    string(eng.CgroupMode()),
		Landlock:      landlockInfo(eng),
		ParkDir:       filepath.Join(cfg.StateDir, "sessions"),
		Volumes:       vols,
	}
	for _, ds := range cfg.Datasets {
		// Checked now, not at the first run that asks: a dataset the
		// kernel cannot mount would fail every one of them.
		if err := container.IdmapSupported(ds.Path); err != nil {
			return fmt.Errorf("[[datasets]] %s: %s cannot be mounted in sandboxes: %w", ds.Name, ds.Path, err)
		}
		dcfg.Datasets = append(dcfg.Datasets, daemon.Dataset{Name: ds.Name, Path: ds.Path})
	}
	if dcfg.Egress, err = egressOptions(cfg, log.With("component", "egress")); err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	if cfg.Queue != nil {
		dcfg.QueueSize, dcfg.NoQueue = *cfg.Queue, *cfg.Queue == 0
	}
	// Python runs, sessions and pool refills on a rootfs with a zygote are
	// forked from it; everything else (and everything while it is down)
	// starts on the engine.
	if profiles := zygotesWhereRunnable(cfg.ZygoteProfiles(), store, log); len(profiles) > 0 {
		zs, err := zygote.New(zygote.Config{Engine: eng, Acquire: store.Acquire, Profiles: profiles, Env: runner.ZygoteEnv(), Prelude: runner.ZygotePrelude(), Held: runner.ZygoteHeld(), Logger: log.With("component", "zygote")})
		if err != nil {
			return fmt.Errorf("zygotes: %w", err)
		}
		// After the pool and the core are done, before the engine.
		defer zs.Close()
		dcfg.Engine, dcfg.Starter, dcfg.Zygotes = zs, zs, zs
		for _, p := range profiles {
			log.Info("zygote", "rootfs", p.Rootfs, "modules", strings.Join(p.Modules, ","), "children", p.Children, "huge_pages", p.HugePages)
		}
	}
	var pl *pool.Pool
	if profiles := poolsWhereRunnable(cfg.PoolProfiles(), store, log); len(profiles) > 0 {
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
	info, err := core.Info(context.Background())
	if err != nil {
		return err
	}
	// One body budget for the daemon, shared by /v1 and the E2B endpoint.
	bodies := httpkit.NewBodies(httpkit.Limits{MaxBodyBytesInFlight: cfg.Budgets.BodyBytes})
	// Every run slot and queue place, plus room for health, info, metrics
	// and fast 429 answers.
	srv, err := server.New(server.Config{Core: core, Logger: log, ShutdownGrace: cfg.ShutdownGrace, Bodies: bodies,
		Limits: httpkit.Limits{MaxConns: max(1024, info.MaxConcurrent+info.QueueSize+64), NewConnsPerPeerPerSecond: cfg.Budgets.PeerConnsPerSecond}})
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

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if cfg.MetricsListen != "" {
		stopMetrics, err := serveMetrics(cfg.MetricsListen, srv.MetricsHandler(), log)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}

	if cfg.E2B.Listen != "" {
		stopE2B, err := serveE2B(ctx, cfg, core, bodies, log.With("component", "e2b"))
		if err != nil {
			return err
		}
		defer stopE2B()
	}

	addr := ln.Addr().String()
	apply := reloadApply(rootfs.Store{Root: cfg.RootfsStore}, core.Reconfigure)
	rl := &reloader{load: opts.Reload, started: cfg, apply: apply, level: opts.Level, log: log, status: "serving on " + addr}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go rl.loop(ctx, hup)
	go func() {
		<-ctx.Done()
		// The runs waiting for a slot are answered 503 now, and none
		// starts after the signal: the grace is for the runs in flight.
		core.Drain()
		sdNotify(log, "STOPPING=1\nSTATUS=draining runs")
	}()

	log.Info("serving", "socket", addr, "socket_activated", activated, "config", cfg.File, "version", opts.Version,
		"max_concurrent", cfg.MaxConcurrent, "rootfs_store", cfg.RootfsStore, "run_dir", cfg.RunDir, "cgroup", cfg.CgroupName, "pid", os.Getpid())
	sdNotify(log, "READY=1\nSTATUS="+rl.status)
	return srv.Run(ctx, ln)
}

// serveMetrics serves h on addr, which must be a loopback address: metrics
// are for the host, never the network. stop closes the listener.
func serveMetrics(addr string, h http.Handler, log *slog.Logger) (stop func() error, err error) {
	if err := config.CheckMetricsAddr(addr); err != nil {
		return nil, fmt.Errorf("metrics-listen %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics-listen: %w", err)
	}
	ms := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := ms.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener", "err", err)
		}
	}()
	log.Info("serving metrics", "addr", ln.Addr().String())
	return ms.Close, nil
}

// landlockInfo is /v1/info's report of the engine's Landlock.
func landlockInfo(eng *container.Engine) agentapi.Landlock {
	mode, abi := eng.Landlock()
	return agentapi.Landlock{Mode: mode, ABI: abi, Active: abi > 0 && mode != sandboxinit.LandlockOff}
}
