package container

import "github.com/nsbox/nsbox/container/sandboxinit"

// MaybeInit runs the sandbox init when this process was started as one, and
// never returns in that case. Call it first thing in main (and in TestMain
// of packages whose tests spawn sandboxes): the nsbox binary is its own
// init when no separate nsbox-init binary is installed next to it.
func MaybeInit() { sandboxinit.MaybeRun() }
