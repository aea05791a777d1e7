package doctor

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/nsbox/nsbox/cgroup"
)

// Status is the verdict of one doctor check.
type Status string

const (
	StatusOK   Status = "ok"
	StatusWarn Status = "warn"
	StatusFail Status = "fail"
)

// Check is one line of the doctor's report.
type Check struct {
	Name   string `json:"check"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Facts is everything the doctor looked at; Diagnose turns it into checks
// without touching the host, so it is tested on fixtures.
type Facts struct {
	EUID int

	MaxUserNS    string // /proc/sys/user/max_user_namespaces
	MaxUserNSErr error
	UserNSErr    error // forking a child with CLONE_NEWUSER

	SeccompActions    string // /proc/sys/kernel/seccomp/actions_avail
	SeccompActionsErr error

	LandlockABI int // landlock_create_ruleset(LANDLOCK_CREATE_RULESET_VERSION); 0: none

	Mounts        []cgroup.Mount    // /proc/self/mountinfo
	ProcCgroup    map[string]string // /proc/self/cgroup
	CgroupErr     error             // reading either of the two
	V2Controllers []string          // cgroup.controllers of the own v2 cgroup
	V2ControlErr  error
	CloneIntoErr  error // forking a child with CLONE_INTO_CGROUP (v2 only)

	PidfdErr    error  // pidfd_open on self
	Filesystems string // /proc/filesystems

	Store    string
	StoreErr error    // stat of the store directory
	Rootfs   []string // names (with a short description) of the rootfs in the store
	Names    []string // the names alone
	ListErr  error
	Required []string // rootfs that must be in the store (doctor --rootfs): missing ones fail

	Socket    string
	SocketErr error // connecting to the daemon socket

	InitBinary string // nsbox-init next to this binary; "" when there is none

	// VolumeTools lists what named volumes need and this host lacks
	// (mkfs.ext4, e2fsck, /dev/loop-control).
	VolumeTools []string
}

// Diagnose judges the host facts.
func Diagnose(f Facts) []Check {
	var out []Check
	add := func(name string, s Status, detail, fix string) {
		out = append(out, Check{Name: name, Status: s, Detail: detail, Fix: fix})
	}

	// A user who is not root needs no root: the daemon's socket is their
	// way in. Root is needed only for sandboxes run in-process and for
	// the daemon itself, so not being root fails only without a socket.
	switch {
	case f.EUID == 0:
		add("root", StatusOK, "running as root", "")
	case f.SocketErr == nil:
		add("root", StatusOK, fmt.Sprintf("running as uid %d: sandboxes go through the daemon at %s, which answers (only in-process runs and the daemon itself need root)", f.EUID, f.Socket), "")
	default:
		add("root", StatusFail, fmt.Sprintf("running as uid %d, and the daemon at %s does not let you in: a user who is not root runs sandboxes through a daemon", f.EUID, f.Socket),
			"get in to the daemon (the daemon socket row's fix), or run as root: sudo nsbox doctor checks the host for the daemon and for in-process runs")
	}

	usernsFix := "allow user namespaces: sysctl -w user.max_user_namespaces=15000 (and kernel.unprivileged_userns_clone=1 where that sysctl exists)"
	switch n, err := strconv.Atoi(strings.TrimSpace(f.MaxUserNS)); {
	case f.MaxUserNSErr != nil:
		add("user namespaces", StatusFail, "cannot read /proc/sys/user/max_user_namespaces: "+f.MaxUserNSErr.Error(), "use a kernel built with CONFIG_USER_NS")
	case err != nil || n <= 0:
		add("user namespaces", StatusFail, "max_user_namespaces = "+strings.TrimSpace(f.MaxUserNS), usernsFix)
	case f.UserNSErr != nil:
		add("user namespaces", StatusFail, "max_user_namespaces = "+strconv.Itoa(n)+" but clone(CLONE_NEWUSER) failed: "+f.UserNSErr.Error(),
			usernsFix+"; check seccomp/AppArmor policy of the container or service nsbox runs in")
	default:
		add("user namespaces", StatusOK, "max_user_namespaces = "+strconv.Itoa(n)+"; clone(CLONE_NEWUSER) works", "")
	}

	actions := strings.Fields(f.SeccompActions)
	switch {
	case f.SeccompActionsErr != nil:
		add("seccomp", StatusFail, "no /proc/sys/kernel/seccomp/actions_avail: "+f.SeccompActionsErr.Error(), "use a kernel built with CONFIG_SECCOMP_FILTER")
	case !slices.Contains(actions, "errno") || !slices.Contains(actions, "allow") || !slices.Contains(actions, "kill_process"):
		add("seccomp", StatusFail, "actions: "+strings.Join(actions, " ")+" (need errno, allow, kill_process)", "use a kernel >= 4.14 with CONFIG_SECCOMP_FILTER")
	default:
		add("seccomp", StatusOK, "actions: "+strings.Join(actions, " "), "")
	}

	if f.LandlockABI > 0 {
		add("landlock", StatusOK, fmt.Sprintf("ABI v%d: every sandbox gets filesystem rules under its namespaces", f.LandlockABI), "")
	} else {
		add("landlock", StatusWarn, `not in this kernel: sandboxes run without the second layer under their namespaces; [security] landlock = "required" refuses to start`,
			"boot a kernel with CONFIG_SECURITY_LANDLOCK=y and landlock in lsm= (cat /sys/kernel/security/lsm)")
	}

	out = append(out, cgroupChecks(f)...)

	switch {
	case f.PidfdErr == nil:
		add("pidfd", StatusOK, "pidfd_open works", "")
	default:
		add("pidfd", StatusWarn, "pidfd_open failed: "+f.PidfdErr.Error(), "use a kernel >= 5.3 so processes are signalled without pid-reuse races")
	}

	if hasFilesystem(f.Filesystems, "overlay") {
		add("overlayfs", StatusOK, "overlay in /proc/filesystems", "")
	} else {
		add("overlayfs", StatusWarn, "overlay not in /proc/filesystems", "modprobe overlay")
	}

	switch {
	case f.StoreErr != nil:
		add("rootfs store", StatusWarn, f.Store+": "+f.StoreErr.Error(), "nsbox rootfs build --profile datasci (or --store DIR for another store)")
	case f.ListErr != nil:
		add("rootfs store", StatusWarn, f.Store+": "+f.ListErr.Error(), "nsbox rootfs build --profile datasci, or remove the broken entry with nsbox rootfs rm")
	case len(f.Rootfs) == 0:
		add("rootfs store", StatusWarn, f.Store+": no rootfs", "nsbox rootfs build --profile datasci (or --profile minimal: python3 only)")
	default:
		add("rootfs store", StatusOK, f.Store+": "+strings.Join(f.Rootfs, ", "), "")
	}

	for _, name := range f.Required {
		if slices.Contains(f.Names, name) {
			add("rootfs "+name, StatusOK, "in "+f.Store, "")
			continue
		}
		add("rootfs "+name, StatusFail, "not in "+f.Store+": sandboxes that ask for it (or runs, when it is default_rootfs) fail",
			"build it on this host: nsbox rootfs build --profile datasci --name "+name+" (Debian's mmdebstrap), or import one built elsewhere: nsbox rootfs import "+name+" FILE.tar.gz")
	}

	if f.InitBinary != "" {
		add("sandbox init", StatusOK, f.InitBinary, "")
	} else {
		add("sandbox init", StatusWarn, "no nsbox-init next to this binary: nsbox re-executes itself as init (~5 ms more CPU per sandbox)", "install bin/nsbox-init next to nsbox (make build install)")
	}

	if len(f.VolumeTools) == 0 {
		add("volumes", StatusOK, "mkfs.ext4, e2fsck and /dev/loop-control present", "")
	} else {
		add("volumes", StatusWarn, "named volumes cannot be made here: no "+strings.Join(f.VolumeTools, ", "),
			"apt-get install e2fsprogs (mkfs.ext4, e2fsck); load the loop module (modprobe loop) for /dev/loop-control")
	}

	if f.SocketErr == nil {
		add("daemon socket", StatusOK, f.Socket+" answers", "")
	} else {
		add("daemon socket", StatusWarn, f.Socket+": "+f.SocketErr.Error(), socketFix(f.SocketErr))
	}
	return out
}

// cgroupChecks reports the cgroup layout, the controllers sandboxes need and
// whether CLONE_INTO_CGROUP can be used.
func cgroupChecks(f Facts) []Check {
	if f.CgroupErr != nil {
		return []Check{{Name: "cgroup mode", Status: StatusFail, Detail: f.CgroupErr.Error(), Fix: "mount /proc"}}
	}
	l := cgroup.Locate(f.Mounts, f.ProcCgroup)
	var out []Check
	switch l.Mode {
	case cgroup.ModeV2:
		out = append(out, Check{Name: "cgroup mode", Status: StatusOK, Detail: "v2: cgroup2 at " + v2Mountpoint(f.Mounts) + ", own cgroup " + l.Unified})
	case cgroup.ModeHybrid:
		out = append(out, Check{Name: "cgroup mode", Status: StatusOK,
			Detail: "hybrid: v1 controllers at " + v1Pattern(l) + ", empty cgroup2 at " + v2Mountpoint(f.Mounts) + " (v1 is used)"})
	case cgroup.ModeV1:
		out = append(out, Check{Name: "cgroup mode", Status: StatusOK, Detail: "v1: controllers at " + v1Pattern(l)})
	default:
		return []Check{{Name: "cgroup mode", Status: StatusFail, Detail: "no cgroup hierarchy mounted",
			Fix: "mount -t cgroup2 none /sys/fs/cgroup (or boot with systemd.unified_cgroup_hierarchy=1)"}}
	}

	for _, c := range cgroup.V2Controllers() {
		name := "cgroup " + c
		if l.Mode == cgroup.ModeV2 {
			switch {
			case f.V2ControlErr != nil:
				out = append(out, Check{Name: name, Status: StatusFail, Detail: f.V2ControlErr.Error(), Fix: "run nsbox in a cgroup it can write (systemd Delegate=yes)"})
			case slices.Contains(f.V2Controllers, c):
				out = append(out, Check{Name: name, Status: StatusOK, Detail: "available at " + l.Unified})
			default:
				out = append(out, Check{Name: name, Status: StatusFail, Detail: c + " not in " + l.Unified + "/cgroup.controllers",
					Fix: "delegate it: systemd service with Delegate=yes, or echo +" + c + " > <parent>/cgroup.subtree_control"})
			}
			continue
		}
		if dir, ok := l.V1[c]; ok {
			out = append(out, Check{Name: name, Status: StatusOK, Detail: "v1 at " + dir})
		} else {
			out = append(out, Check{Name: name, Status: StatusFail, Detail: "v1 " + c + " controller not mounted",
				Fix: "mkdir -p /sys/fs/cgroup/" + c + " && mount -t cgroup -o " + c + " cgroup /sys/fs/cgroup/" + c})
		}
	}
	if l.Mode != cgroup.ModeV2 {
		for _, c := range []string{"cpuacct", "freezer"} {
			if dir, ok := l.V1[c]; ok {
				out = append(out, Check{Name: "cgroup " + c, Status: StatusOK, Detail: "v1 at " + dir})
			} else {
				why := map[string]string{"cpuacct": "no CPU time in results", "freezer": "kill signals each pid without freezing first"}[c]
				out = append(out, Check{Name: "cgroup " + c, Status: StatusWarn, Detail: "v1 " + c + " not mounted: " + why,
					Fix: "mkdir -p /sys/fs/cgroup/" + c + " && mount -t cgroup -o " + c + " cgroup /sys/fs/cgroup/" + c})
			}
		}
		out = append(out, Check{Name: "CLONE_INTO_CGROUP", Status: StatusOK, Detail: "n/a (v1: pids are moved with cgroup.procs)"})
		return out
	}
	if f.CloneIntoErr == nil {
		out = append(out, Check{Name: "CLONE_INTO_CGROUP", Status: StatusOK, Detail: "clone3 into " + l.Unified + " works"})
	} else {
		out = append(out, Check{Name: "CLONE_INTO_CGROUP", Status: StatusWarn, Detail: "clone3 with CLONE_INTO_CGROUP failed: " + f.CloneIntoErr.Error() + "; pids are moved with cgroup.procs instead",
			Fix: "use a kernel >= 5.7"})
	}
	return out
}

func v2Mountpoint(mounts []cgroup.Mount) string {
	for _, m := range mounts {
		if m.FSType == "cgroup2" {
			return m.Mountpoint
		}
	}
	return "?"
}

// v1Pattern names where the v1 controllers are, "/sys/fs/cgroup/<ctrl>" when
// they follow the usual layout.
func v1Pattern(l cgroup.Layout) string {
	usual := len(l.V1Mounts) > 0
	for _, mp := range l.V1Mounts {
		if !strings.HasPrefix(mp, "/sys/fs/cgroup/") {
			usual = false
		}
	}
	if usual {
		return "/sys/fs/cgroup/<ctrl>"
	}
	var parts []string
	for _, c := range cgroup.V1Controllers() {
		if mp, ok := l.V1Mounts[c]; ok {
			parts = append(parts, c+"="+mp)
		}
	}
	return strings.Join(parts, " ")
}

// hasFilesystem reports whether /proc/filesystems lists fs.
func hasFilesystem(procFilesystems, fs string) bool {
	for _, line := range strings.Split(procFilesystems, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[len(f)-1] == fs {
			return true
		}
	}
	return false
}

// Runnable reports whether nsbox can run here: no check failed.
func Runnable(checks []Check) bool {
	for _, c := range checks {
		if c.Status == StatusFail {
			return false
		}
	}
	return true
}

// Verdict is doctor's last line: whether nsbox can run here, and for a
// user who is not root, through what.
func Verdict(f Facts, checks []Check) string {
	ok := Runnable(checks)
	switch {
	case f.EUID == 0 && ok:
		return "nsbox can run here"
	case f.EUID == 0:
		return "nsbox cannot run here"
	case ok:
		return fmt.Sprintf("nsbox can run here for uid %d, through the daemon at %s", f.EUID, f.Socket)
	case f.SocketErr != nil:
		return fmt.Sprintf("uid %d cannot run sandboxes here yet: it needs a daemon's socket it may use (the daemon socket row) or root", f.EUID)
	}
	return "nsbox cannot run here"
}

// socketFix names what to do about a socket that does not answer, by why.
func socketFix(err error) string {
	switch {
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return "the socket (or its directory) does not let you in: join its group (sudo usermod -aG nsbox $USER, then log in again), or restart the daemon so it fixes its directory's mode"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "a stale socket: nothing listens on it; start the daemon: nsbox daemon (or systemctl start nsbox)"
	}
	return "start the daemon: nsbox daemon (or systemctl start nsbox)"
}
