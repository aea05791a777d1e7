// Package doctor says what a host needs to run nsbox sandboxes, checked one
// by one: root, user namespaces, seccomp, the cgroup layout and controllers,
// CLONE_INTO_CGROUP, pidfd, overlayfs, the sandbox init, the rootfs store
// and the daemon socket. Gather looks at the host, Diagnose judges what it
// saw without touching the host, and the CLI (nsbox doctor) prints the
// report.
package doctor
