package container

import "github.com/nsbox/nsbox/container/sandboxinit"

// MaybeInit runs the sandbox init when this process was started as one, and
// never returns in that case. Call it first thing in main (and in TestMain
// of packages whose tests spawn sandboxes): the nsbox binary is its own
// init when no separate nsbox-init binary is installed next to it.
func MaybeInit() { sandboxinit.MaybeRun() }

// ErrNoLandlock is a [security] landlock = "required" on a kernel without
// Landlock.
var ErrNoLandlock = sandboxinit.ErrNoLandlock

// Landlock is the engine's [security] landlock mode and the kernel's
// Landlock ABI version (0: none), as /v1/info and nsbox doctor say them.
func (e *Engine) Landlock() (mode string, abi int) {
	return e.cfg.Landlock, sandboxinit.LandlockABI()
}
