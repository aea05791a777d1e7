package service

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nsbox/nsbox/daemon/config"
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
