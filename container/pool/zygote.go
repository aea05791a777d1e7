package pool

import (
	"context"
)

// Zygotes tells when the zygote of a rootfs is ready; zygote.Set
// implements it. A pool whose Starter is also a Zygotes replaces, each time
// the zygote of a profile's rootfs becomes ready, the runners it started
// cold while that zygote was starting or restarting: they lack the
// zygote's imports.
type Zygotes interface {
	// ZygoteReady reports whether the zygote of rootfs is ready now, and
	// returns a channel closed at its next change of state (nil: rootfs
	// has no zygote to wait for).
	ZygoteReady(rootfs string) (ready bool, changed <-chan struct{})
}

// follow renews the profile each time the zygote of its rootfs is seen
// ready after a change of state, until ctx ends or there is no zygote to
// wait for. A change is a state that differs from the last, so a zygote
// seen ready again has been down in between.
func (pr *profile) follow(ctx context.Context, zs Zygotes) {
	if !pr.Language.Forks() { // never forked: nothing to renew
		return
	}
	for {
		ready, changed := zs.ZygoteReady(pr.Rootfs)
		if ready {
			pr.renew()
		}
		if changed == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// renew discards the profile's ready runners that were not forked from a
// zygote, and marks the refills under way now as stale (spawn discards them
// if they turn out cold). The refill workers replace them, within the
// refill budget, from the zygote that is now ready.
func (pr *profile) renew() {
	pr.mu.Lock()
	pr.epoch++
	var cold, kept []*entry
	for _, e := range pr.ready {
		if e.m.Forked() {
			kept = append(kept, e)
			continue
		}
		close(e.taken)
		cold = append(cold, e)
	}
	pr.ready = kept
	pr.replaced += uint64(len(cold))
	pr.mu.Unlock()
	if len(cold) == 0 {
		return
	}
	pr.log.Info("zygote ready: replacing the runners started cold meanwhile", "rootfs", pr.Rootfs, "runners", len(cold))
	for _, e := range cold {
		e.discard()
	}
	pr.signal()
}
