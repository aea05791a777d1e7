package container

import (
	"io"

	"github.com/nsbox/nsbox/agentapi/limits"
	"github.com/nsbox/nsbox/container/internal/runenv"
	"github.com/nsbox/nsbox/seccomp"
)

// Spec describes one run.
type Spec struct {
	// ID names the run in logs, cgroups and state directories. Empty: generated.
	ID string
	// RootfsDir is the host directory of the rootfs tree, mounted read-only as /.
	RootfsDir string
	// Argv is the command; Argv[0] is looked up in PATH inside the sandbox.
	Argv []string
	// Env holds extra KEY=VALUE pairs on top of the clean base environment.
	Env []string
	// Stdin feeds the command's standard input; nil means /dev/null.
	Stdin io.Reader
	// Stdout and Stderr, when set, receive output live as it is produced,
	// in addition to the capped copies in the Result. Writes past the output
	// cap are not forwarded.
	Stdout, Stderr io.Writer
	// Files are written into /workspace before the command starts.
	Files []File
	// Limits bound the run; zero fields take DefaultLimits' values.
	Limits Limits
	// Seccomp replaces the engine's default program when non-nil.
	Seccomp seccomp.Program
	// StreamOutput sends stdout and stderr only to the live writers: the
	// engine keeps no copy and does not enforce Limits.OutputBytes (a caller
	// that caps output itself, like the Python runner per cell, sets it for
	// long-lived sandboxes). The Result's Stdout/Stderr are then empty.
	StreamOutput bool
	// Control asks for a control socket: fd 3 of the command is one end of
	// a Unix stream socketpair, Sandbox.Control the other (the Python
	// runner speaks its protocol over it).
	Control bool
	// ReturnFiles are glob patterns (path.Match syntax, relative to
	// /workspace) of files whose content is returned inline in the Result,
	// up to MaxInlineBytes in all.
	ReturnFiles []string
	// BeforeStart, when set, is called with the host pid of the sandbox's
	// first process once its namespaces exist and before its command
	// runs; an error ends the sandbox. The daemon's egress proxy creates
	// its listener in the sandbox's network namespace here.
	BeforeStart func(pid int) error
	// Mounts are host directories shown at /mnt/NAME (mount_linux.go).
	// The engine's caller decides every Source; a sandbox never names one.
	Mounts []Mount
	// Background starts the sandbox with the least CPU weight
	// (cgroup.Limits.Background) until Sandbox.Foreground: a pool's
	// sandbox, made ahead of any run, sets itself up on the CPU the runs
	// leave. Not a limit: on an idle host it takes a whole CPU.
	Background bool
	// Init makes pid 1 a minimal init (package reaper, docker --init's tini)
	// and the command its child, whose death by signal N exits 128+N.
	Init bool
	// Imports are the top-level modules a Python run's code imports, when
	// known (zygote.Imports); nil when not. It only routes the run among
	// a rootfs's zygotes (zygote.Set); isolation never depends on it.
	Imports []string
}

// Mount shows a host directory inside the sandbox. The engine prepares it
// host-side as a detached, idmapped bind mount (open_tree + mount_setattr)
// and hands it to the sandbox's init or zygote child, which attaches it at
// Target under a small read-only tmpfs on /mnt.
type Mount struct {
	// Source is the host directory (absolute).
	Source string
	// Target is where the sandbox sees it: /mnt/NAME, NAME a safe name
	// (ValidMountName).
	Target string
	// ReadOnly mounts it MOUNT_ATTR_RDONLY: writes fail with EROFS.
	ReadOnly bool
	// NoExec mounts it MOUNT_ATTR_NOEXEC. Every mount is nosuid and nodev.
	NoExec bool
	// OwnerUID and OwnerGID are the ids on disk that the sandbox user
	// (uid and gid 1000) sees as its own, and that files it creates get on
	// disk. Files owned by any other id read as the overflow id (65534,
	// nobody) inside and keep their mode bits.
	OwnerUID, OwnerGID int
}

// File is an input file placed in the workspace.
type File struct {
	Path string // relative to /workspace; no "..", not absolute
	Data []byte
	Mode uint32 // permission bits; 0 means 0644
}

// Limits bound the resources of one run: the row values of the one limits
// table (package limits), which also has their minimums and defaults.
type Limits = limits.Set

// DefaultLimits are applied to zero fields of a Spec's Limits.
func DefaultLimits() Limits { return limits.Defaults() }

// ValidEnvKey reports whether k is a usable environment variable name.
func ValidEnvKey(k string) error { return runenv.ValidKey(k) }
