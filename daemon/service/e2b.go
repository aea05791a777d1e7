package service

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/nsbox/nsbox/agentapi/e2b"
	"github.com/nsbox/nsbox/agentapi/httpkit"
	"github.com/nsbox/nsbox/daemon"
	"github.com/nsbox/nsbox/daemon/config"
)

// serveE2B serves the E2B-compatible endpoint ([e2b], docs/E2B.md) on its
// TCP address until ctx ends; stop waits for it to drain. bodies is the
// daemon's body budget, shared with /v1. It reads the
// keys file once, at start: a daemon with an unsafe or empty one does not
// start.
func serveE2B(ctx context.Context, cfg config.Config, core *daemon.Daemon, bodies *httpkit.Bodies, log *slog.Logger) (stop func(), err error) {
	keys, err := e2b.LoadKeys(cfg.E2B.KeysFile)
	if err != nil {
		return nil, err
	}
	srv, err := e2b.New(e2b.Config{Core: core, Keys: keys, Logger: log, ShutdownGrace: cfg.ShutdownGrace, Bodies: bodies,
		Limits: httpkit.Limits{NewConnsPerPeerPerSecond: cfg.Budgets.PeerConnsPerSecond}, MaxKeyRequests: cfg.E2B.KeyRequests,
		LegacyDir: filepath.Join(cfg.StateDir, "e2b")})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.E2B.Listen)
	if err != nil {
		return nil, fmt.Errorf("e2b listen: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Run(ctx, ln); err != nil {
			log.Error("e2b endpoint", "err", err)
		}
	}()
	log.Info("serving the E2B endpoint", "addr", ln.Addr().String())
	return func() { cancel(); <-done }, nil
}
