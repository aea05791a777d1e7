// Package container is nsbox's sandbox engine: a Spec goes in, a fresh set of
// namespaces, a cgroup, a workspace and a seccomp filter are built around the
// command, and a Result comes out after everything the run created is gone.
//
// The spawn path is nsbox's own: os/exec clones a sealed copy of the init
// (cmd/nsbox-init, or this binary re-executed) into new
// user/pid/net/mount/ipc/uts/cgroup namespaces (placed in its cgroup by
// CLONE_INTO_CGROUP on cgroup v2), and that init (package sandboxinit)
// builds the mount tree, drops to uid 1000, installs a seccomp program that
// the engine compiled once, and execs the user's command. A Zygote's
// children are built by the same path (Engine.start) with another kind of
// process; docs/ARCHITECTURE.md maps the package and its parts.
package container
