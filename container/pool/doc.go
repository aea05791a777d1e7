// Package pool keeps Python runners started ahead of time, so that a run
// or a new session whose rootfs, limits and environment match a configured
// profile skips the sandbox spawn and the interpreter's start (and, with
// pre-imports, the imports of numpy, pandas and the like).
//
// Every pooled runner is a fresh sandbox made exactly like a cold one; it
// serves exactly one run or one session and is never given back. The pool
// refills in the background: at most Config.Refills spawns at a time per
// profile, and none while the daemon's run slots are all busy, so that
// refilling never takes CPU from live runs. A runner that dies while it
// waits is discarded and replaced.
//
// When the Starter forks from zygotes (zygote.Set), runners started while a
// rootfs's zygote was starting or restarting are cold: they lack its
// imports. Each time that zygote becomes ready, the pool discards them and
// refills from it, within the same refill budget.
package pool
