package service

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/nsbox/nsbox/container/pool"
	"github.com/nsbox/nsbox/container/zygote"
	"github.com/nsbox/nsbox/daemon"
	"github.com/nsbox/nsbox/daemon/config"
	"github.com/nsbox/nsbox/daemon/lang"
	"github.com/nsbox/nsbox/daemon/policy"
	"github.com/nsbox/nsbox/rootfs"
)

// reloadApply is a reload's apply: a configuration whose default rootfs
// the store lacks is refused (the running one is kept), as at the start;
// otherwise its policy goes to reconfigure.
func reloadApply(store rootfs.Store, reconfigure func(policy.Policy) error) func(config.Config) error {
	return func(next config.Config) error {
		if err := checkDefaultRootfs(store, next.DefaultRootfs); err != nil {
			return err
		}
		return reconfigure(next.Policy())
	}
}

// checkDefaultRootfs refuses to start a daemon whose default rootfs is not
// in its store: every request that names none (nsbox exec, the README's
// first commands) would fail, while the pool and the zygotes retried it
// in WARN lines. The Kubernetes manifest's init container refuses the same
// (nsbox doctor --rootfs); a rootfs built later needs a restart, as any
// setting the daemon reads at its start.
func checkDefaultRootfs(store rootfs.Store, name string) error {
	_, err := store.Locate(name)
	if !errors.Is(err, rootfs.ErrNotFound) {
		return err
	}
	profile, target := "minimal", ""
	switch name {
	case "default":
		profile, target = "datasci", " (from a checkout: make rootfs-default)"
	case "minimal":
		target = " (from a checkout: make rootfs-test)"
	}
	msg := fmt.Sprintf("the default rootfs %q is not in the store %s: build it with `nsbox rootfs build --profile %s --name %s`%s",
		name, store.Root, profile, name, target)
	if have, _ := store.List(); len(have) > 0 {
		names := make([]string, len(have))
		for i, r := range have {
			names[i] = r.Name
		}
		msg += fmt.Sprintf(", or make one the store has the default with --default-rootfs or default_rootfs (it has: %s)", strings.Join(names, ", "))
	}
	return errors.New(msg)
}

// poolsWhereRunnable drops the pools whose rootfs lacks what their
// language needs (daemon/lang): the built-in "node" pool on a minimal
// default rootfs has no Node.js, a Python pool on an argv-only rootfs no
// python3 its runner runs on. They could never start a runner, and would
// retry it for as long as the daemon runs.
func poolsWhereRunnable(profiles []pool.Profile, store daemon.Store, log *slog.Logger) []pool.Profile {
	out := profiles[:0:0]
	for _, p := range profiles {
		if runnable(lang.OfRunner(p.Language), p.Rootfs, store, log.With("pool", p.Name)) {
			out = append(out, p)
		}
	}
	return out
}

// zygotesWhereRunnable drops the zygotes on an argv-only rootfs: a
// zygote is a Python runner, which its python3 would not run.
func zygotesWhereRunnable(profiles []zygote.Profile, store daemon.Store, log *slog.Logger) []zygote.Profile {
	out := profiles[:0:0]
	for _, p := range profiles {
		if runnable(lang.Default(), p.Rootfs, store, log.With("zygote", p.Rootfs, "lean", p.Lean)) {
			out = append(out, p)
		}
	}
	return out
}

// runnable reports whether the language l's runner can start on the
// rootfs name, and logs why not. A rootfs not in the store is waited for
// (the pool or zygote retries) unless l needs files it could not be
// checked for.
func runnable(l *lang.Descriptor, name string, store daemon.Store, log *slog.Logger) bool {
	log = log.With("language", l.Name, "rootfs", name)
	dir, err := store.Dir(name)
	switch {
	case err != nil && len(l.Needs) > 0:
		log.Info("not started: its rootfs is not in the store", "err", err)
		return false
	case err != nil:
		return true
	case rootfs.ArgvOnly(dir) && !l.OnRootfs(dir):
		log.Info("not started: the rootfs is argv-only (no python3 " + rootfs.MinPython + " or newer; nsbox rootfs list): its runs are commands (argv)")
		return false
	case !l.OnRootfs(dir):
		log.Info("not started: the rootfs lacks what its language needs (the datasci profile has it)", "needs", l.Needs)
		return false
	}
	return true
}
