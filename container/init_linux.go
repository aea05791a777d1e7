package container

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/nsbox/nsbox/container/sandboxinit"
)

// MaybeInit runs the sandbox init when this process was started as one, and
// never returns in that case. Call it first thing in main (and in TestMain
// of packages whose tests spawn sandboxes): the nsbox binary is its own
// init when no separate nsbox-init binary is installed next to it.
func MaybeInit() { sandboxinit.MaybeRun() }

// ErrNoLandlock is a [security] landlock = "required" on a kernel without
// Landlock.
var ErrNoLandlock = errors.New(`[security] landlock = "required" but this kernel has no Landlock: boot with lsm=...,landlock (CONFIG_SECURITY_LANDLOCK=y), or set landlock = "auto"`)

// checkLandlock checks cfg.Landlock against the kernel once: required
// without Landlock is an error; auto without it says so once and runs.
func checkLandlock(cfg *Config, log *slog.Logger) error {
	switch cfg.Landlock {
	case "":
		cfg.Landlock = sandboxinit.LandlockAuto
	case sandboxinit.LandlockAuto, sandboxinit.LandlockRequired, sandboxinit.LandlockOff:
	default:
		return fmt.Errorf("landlock %q: want auto, required or off", cfg.Landlock)
	}
	abi := sandboxinit.LandlockABI()
	switch {
	case abi == 0 && cfg.Landlock == sandboxinit.LandlockRequired:
		return ErrNoLandlock
	case abi == 0 && cfg.Landlock == sandboxinit.LandlockAuto:
		log.Warn("this kernel has no Landlock: sandboxes run without the second layer under their namespaces (nsbox doctor)")
	}
	return nil
}

// Landlock is the engine's [security] landlock mode and the kernel's
// Landlock ABI version (0: none), as /v1/info and nsbox doctor say them.
func (e *Engine) Landlock() (mode string, abi int) {
	return e.cfg.Landlock, sandboxinit.LandlockABI()
}
