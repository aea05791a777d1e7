package service

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"

	"github.com/nsbox/nsbox/daemon/config"
	"github.com/nsbox/nsbox/daemon/egress"
	"github.com/nsbox/nsbox/daemon/egress/pkgcache"
)

// egressOptions are the egress proxy's settings from [network]: names
// resolved by [network.hosts] first, then DNS; the ranges opened; the CA
// and the package cache under <state_dir>/egress (made only when
// [network] allows something, so a daemon without network writes
// nothing there).
func egressOptions(cfg config.Config, log *slog.Logger) (*egress.Options, error) {
	n := cfg.Network
	hosts := n.Hosts
	o := &egress.Options{
		Open: n.Open,
		Log:  log,
		Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			if a, ok := hosts[host]; ok {
				return []netip.Addr{a}, nil
			}
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		},
	}
	if !n.Enabled() {
		return o, nil
	}
	dir := filepath.Join(cfg.StateDir, "egress")
	ca, err := egress.LoadOrCreateCA(dir)
	if err != nil {
		return nil, err
	}
	o.CA = ca
	if n.CacheBytes > 0 {
		if o.Cache, err = pkgcache.Open(filepath.Join(dir, "cache"), n.CacheBytes); err != nil {
			return nil, err
		}
		o.Intercept = n.CacheHosts
	}
	log.Info("egress proxy ready", "allow", len(n.Allow), "secrets", len(n.Secrets), "open", len(n.Open), "cache_bytes", n.CacheBytes, "cache_hosts", len(o.Intercept))
	return o, nil
}
