package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/nsbox/nsbox/daemon/config"
)

// reloader applies the configuration again on SIGHUP (systemctl reload).
type reloader struct {
	load    func() (config.Config, error) // Options.Reload
	started config.Config                 // what the daemon started with: restart-only settings stay as here
	// apply makes the live part of a checked configuration (its Policy)
	// take effect; on error nothing has changed.
	apply  func(config.Config) error
	level  *slog.LevelVar
	log    *slog.Logger
	status string // sd_notify STATUS while serving
}

func (r *reloader) loop(ctx context.Context, hup <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			r.reload()
		}
	}
}

// reload re-reads the configuration (file, environment, flags). A
// configuration with errors is rejected as a whole, each error logged with
// its line, and the running one is kept. Otherwise the limits, profiles,
// default rootfs, session settings and log level apply to the requests that
// arrive from now on, and the settings that need a restart are named in the
// log.
func (r *reloader) reload() {
	sdNotify(r.log, "RELOADING=1\nSTATUS=reloading the configuration")
	defer sdNotify(r.log, "READY=1\nSTATUS="+r.status)
	next, err := r.load()
	if err != nil {
		var ce *config.Errors
		if errors.As(err, &ce) {
			for _, e := range ce.Errs {
				r.log.Error("reload: config error: " + e.Format(ce.File))
			}
		}
		r.log.Error("reload: configuration rejected; keeping the running configuration", "err", firstLine(err))
		return
	}
	if err := r.apply(next); err != nil {
		r.log.Error("reload: configuration rejected; keeping the running configuration", "err", err)
		return
	}
	if r.level != nil {
		r.level.Set(next.Level())
	}
	names := make([]string, 0, len(next.Profiles))
	for _, p := range next.Profiles {
		names = append(names, p.Name)
	}
	d, m := next.Limits() // the effective values, not the file's zeros
	r.log.Info("reload: configuration applied", "config", next.File, "log_level", next.LogLevel, "default_rootfs", next.DefaultRootfs,
		"default_limits", fmt.Sprintf("%+v", d), "max_limits", fmt.Sprintf("%+v", m), "profiles", strings.Join(names, ","),
		"max_sessions", next.Sessions.Max, "session_idle_timeout", next.Sessions.IdleTimeout, "session_max_lifetime", next.Sessions.MaxLifetime)
	for _, w := range next.Warnings() {
		r.log.Warn("config: " + w.Format(next.File))
	}
	if keys := r.started.RestartKeys(next); len(keys) > 0 {
		r.log.Warn("reload: these settings changed but take effect only after a restart (systemctl restart nsbox); until then the daemon keeps the values it started with",
			"keys", strings.Join(keys, ","))
	}
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
