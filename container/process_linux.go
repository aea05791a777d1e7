package container

import (
	"bytes"
	"math"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/cgroup"
	"github.com/nsbox/nsbox/container/internal/reaper"
	"github.com/nsbox/nsbox/container/internal/zyproto"
	"github.com/nsbox/nsbox/container/sandboxinit"
	"github.com/nsbox/nsbox/container/workspace"
	"github.com/nsbox/nsbox/seccomp"
)

// process is a sandbox's main process, however it was made: an init the
// engine cloned (initProcess) or a child a zygote forked (zygoteChild).
// Like runc's parentProcess, it lets one Sandbox and one construction path
// (Engine.start) serve both kinds.
type process interface {
	// owner is the host uid (and gid) of the sandbox user: it owns
	// /workspace.
	owner() int
	cgroup() *cgroup.Cgroup
	// launch hands the process its sandbox and its mounts (the workspace
	// first, then d.mounts' in order), and returns once the user's command
	// runs.
	launch(d *description, mounts []*os.File) error
	// stdio hands over the engine's ends of the command's stdout, stderr
	// and stdin (the taker closes stdin), and of its control socket (fd 3
	// of the command; it stays the process's and destroy closes it).
	stdio() (stdout, stderr, stdin, control *os.File)
	pid() int
	signal(sig syscall.Signal) error
	// done is closed when the process has exited, before it is reaped.
	done() <-chan struct{}
	// hasExited asks the kernel, without blocking, whether the process has
	// exited: done may not have fired yet when the engine was held up.
	hasExited() bool
	// wait waits for the exit; exited is false when the status is unknown.
	wait() (ws syscall.WaitStatus, exited bool)
	// destroy kills what is left of the process, removes its cgroup and
	// releases its ids. Safe on a half-built process and more than once.
	destroy()
}

// description is a sandbox as the engine decided it from its spec: an
// init's config and a zygote child's fork request are both made from it,
// so the two kinds of sandbox carry the same facts.
type description struct {
	id     string
	rootfs string
	argv   []string
	env    []string
	limits Limits
	// background is Spec.Background.
	background bool
	seccomp    seccomp.Program
	masked     []string
	readOnly   []string
	control    bool
	landlock   string // Config.Landlock
	// mounts are the NAMEs of Spec.Mounts, attached at /mnt/NAME.
	mounts []string
	init   bool // Spec.Init: pid 1 is the reaper, one task more
	// beforeStart is Spec.BeforeStart: launch calls it once the process
	// is in its namespaces (a zygote child: verified) and before the
	// command runs.
	beforeStart func(pid int) error
}

// Fixed facts of every sandbox.
const (
	sandboxHostname = "sandbox"
	sandboxNoFile   = 1024
)

// describe decides spec's sandbox; spec is valid and lim its limits with
// defaults.
func (e *Engine) describe(spec *Spec, lim Limits, env []string) *description {
	prog := spec.Seccomp
	if prog == nil {
		prog = e.cfg.Seccomp
	}
	return &description{
		id: spec.ID, rootfs: spec.RootfsDir, argv: spec.Argv, env: env, limits: lim, background: spec.Background,
		seccomp: prog, masked: e.masked, readOnly: e.ro, control: spec.Control, beforeStart: spec.BeforeStart, landlock: e.cfg.Landlock,
		mounts: mountNames(spec.Mounts), init: spec.Init,
	}
}

// cgroupLimits are the limits of the sandbox's cgroup.
func (d *description) cgroupLimits() cgroup.Limits {
	return cgroup.Limits{MemoryBytes: d.limits.MemoryBytes, Pids: d.limits.Pids + reaper.Tasks(d.init), CPUs: d.limits.CPUs, Background: d.background}
}

// threads is how many threads numeric libraries get: the CPU limit,
// rounded up.
func threads(cpus float64) int { return max(1, int(math.Ceil(cpus))) }

// initConfig is the config of an init; cgroupNS asks it for a cgroup
// namespace of its own (when it was not cloned into one).
//
// A zygote's init (zygote) skips the masks, the filter and the file size
// limit: its children mount their own /proc, which the kernel allows only
// where a fully visible one exists, apply the masks and the filter
// themselves, and set their own (lower) file size limit.
func (d *description) initConfig(zygote, cgroupNS bool) sandboxinit.Config {
	c := sandboxinit.Config{
		Rootfs:     d.rootfs,
		Argv:       d.argv,
		Env:        d.env,
		Hostname:   sandboxHostname,
		TmpBytes:   d.limits.DiskBytes,
		TmpInodes:  workspace.Inodes(d.limits.DiskBytes),
		NoFile:     sandboxNoFile,
		FSizeBytes: uint64(d.limits.DiskBytes),
		UID:        SandboxUID,
		GID:        SandboxGID,
		Masked:     d.masked,
		ReadOnly:   d.readOnly,
		Seccomp:    d.seccomp,
		CgroupNS:   cgroupNS,
		Control:    d.control,
		Zygote:     zygote,
		Landlock:   d.landlock,
		Mounts:     d.mounts,
		Init:       d.init,
	}
	if zygote {
		c.Masked, c.ReadOnly, c.Seccomp, c.FSizeBytes = nil, nil, nil, unix.RLIM_INFINITY
	}
	return c
}

// zygoteRequest is the fork request of a zygote's child in slot: the same
// facts as initConfig, which the child applies to itself, but the /proc
// masks and read-only paths: those are the engine's for every sandbox, so
// they go to the zygote once (zyproto.Config) and each spare applies them
// before it is taken; and the filter when it is the zygote's default
// (zygoteFilter, decoded once there). Its command goes to it separately
// (zyproto.Run), once it is verified.
func (d *description) zygoteRequest(slot int, zygoteFilter []byte, testSkip string) zyproto.Request {
	filter := d.seccomp
	if bytes.Equal(filter, zygoteFilter) {
		filter = nil
	}
	return zyproto.Request{
		Slot: slot, Hostname: sandboxHostname,
		TmpBytes: d.limits.DiskBytes, TmpInodes: workspace.Inodes(d.limits.DiskBytes), NoFile: sandboxNoFile, FSize: uint64(d.limits.DiskBytes),
		UID: SandboxUID, GID: SandboxGID, Seccomp: filter,
		CgroupNS: true, Threads: threads(d.limits.CPUs), Control: d.control,
		TestSkip: testSkip, Mounts: d.mounts, Landlock: d.landlock,
	}
}
