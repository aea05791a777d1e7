package zygote

import (
	"errors"
	"time"

	"github.com/nsbox/nsbox/container"
)

// fallback records a run sl's zygote could not take (err, from its
// Start), which then starts cold: ~20x slower and ~30 MiB more than a
// child. The first of a spell is logged as a warning with its reason; the
// rest of the spell at debug level only (a full zygote under a burst of
// sessions fails every run past its children), till a fork ends it.
func (s *Set) fallback(sl *slot, run string, err error) {
	reason := "error"
	if errors.Is(err, container.ErrNoUIDs) { // every child slot is taken
		reason = "full"
		sl.full.Add(1)
	}
	n := sl.fallbacks.Add(1)
	sl.mu.Lock()
	sl.lastFallback, sl.lastFallbackAt = err.Error(), time.Now()
	sl.mu.Unlock()
	log := s.log.With("rootfs", sl.p.Rootfs, "lean", sl.p.Lean, "reason", reason, "run", run, "err", err)
	if !sl.falling.CompareAndSwap(false, true) {
		log.Debug("zygote could not take the run; starting it cold")
		return
	}
	sl.spellFrom.Store(n - 1)
	hint := "see the error"
	if reason == "full" {
		hint = "raise [zygote] children (sessions keep a child for their lifetime; [sessions] max bounds them)"
	}
	log.Warn("zygote could not take a run: runs it should take start cold (slower, more memory) until it can again; said once per spell, see /v1/info zygotes[].fallbacks", "hint", hint)
}

// forked records a run sl's zygote took; it ends a spell of fallbacks.
func (s *Set) forked(sl *slot) {
	sl.forks.Add(1)
	if sl.falling.Load() && sl.falling.CompareAndSwap(true, false) {
		s.log.Info("zygote takes runs again", "rootfs", sl.p.Rootfs, "lean", sl.p.Lean, "started_cold", sl.fallbacks.Load()-sl.spellFrom.Load())
	}
}
