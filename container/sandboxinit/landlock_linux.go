package sandboxinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock modes of Config.Landlock ([security] landlock).
const (
	LandlockOff      = "off"
	LandlockAuto     = "auto"     // applied as far as the kernel's ABI goes
	LandlockRequired = "required" // a kernel without Landlock is an error
)

// ErrNoLandlock is a [security] landlock = "required" on a kernel without
// Landlock.
var ErrNoLandlock = errors.New(`[security] landlock = "required" but this kernel has no Landlock: boot with lsm=...,landlock (CONFIG_SECURITY_LANDLOCK=y), or set landlock = "auto"`)

// CheckLandlock checks a mode against the kernel once, for an engine: ""
// is auto; required without Landlock is ErrNoLandlock; auto without it
// runs, and absent says so (for the engine to log once).
func CheckLandlock(mode string) (_ string, absent bool, _ error) {
	switch mode {
	case "":
		mode = LandlockAuto
	case LandlockAuto, LandlockRequired, LandlockOff:
	default:
		return "", false, fmt.Errorf("landlock %q: want auto, required or off", mode)
	}
	absent = mode != LandlockOff && kernelLandlockABI() == 0
	if absent && mode == LandlockRequired {
		return "", true, ErrNoLandlock
	}
	return mode, absent, nil
}

// Filesystem rights by Landlock ABI version: v1's thirteen, then refer
// (v2), truncate (v3) and ioctl on devices (v5). Network rules (v4) are
// left out: a sandbox's loopback is its own and programs bind and connect
// there (test servers, language servers); its only way out is the proxy.
const (
	llRead  = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	llWrite = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM | unix.LANDLOCK_ACCESS_FS_REFER | unix.LANDLOCK_ACCESS_FS_TRUNCATE
	llFile = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// llHandled is what each ABI version can restrict (index: the version).
var llHandled = [...]uint64{
	0,
	(1 << 13) - 1,
	(1 << 14) - 1,
	(1 << 15) - 1,
	(1 << 15) - 1,
	(1 << 16) - 1,
}

// LandlockABI is the kernel's Landlock ABI version, 0 without Landlock
// (not built, or not enabled at boot).
func LandlockABI() int {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0
	}
	return int(v)
}

// kernelLandlockABI is LandlockABI; tests stand in a kernel without it.
var kernelLandlockABI = LandlockABI

// landlockHidden are top-level entries of a rootfs that a sandboxed
// program has no use for and gets no right on (/mnt, /proc, /dev, /tmp
// and /workspace get rules of their own; /home/user is the workspace), so
// that a host directory that ever appeared there (a mount namespace
// escape, a mount the engine did not make) is refused.
var landlockHidden = map[string]bool{
	"mnt": true, "media": true, "srv": true, "root": true, "home": true, "boot": true,
	"lost+found": true, "proc": true, "dev": true, "tmp": true, "workspace": true,
}

// llRule is one path and what is allowed beneath it.
type llRule struct {
	path   string
	access uint64
}

// landlockRules are a sandbox's rules (zygote.py makes the same ones), read inside its new root: any
// directory listed; every other top-level directory of the rootfs read
// and execute (its mounts make it read-only); the workspace, /tmp, /dev/shm and /proc read-write;
// the mounts under /mnt as they are mounted (a read-only one stays so);
// the device nodes, with their ioctls (a terminal's).
func landlockRules(mounts []string) ([]llRule, error) {
	ents, err := os.ReadDir("/")
	if err != nil {
		return nil, err
	}
	// Listing any directory stays possible (ls /, find /): names only.
	rules := []llRule{{"/", unix.LANDLOCK_ACCESS_FS_READ_DIR}}
	for _, e := range ents {
		p := "/" + e.Name()
		if !landlockHidden[e.Name()] && isDirFollow(p) {
			rules = append(rules, llRule{p, llRead})
		}
	}
	for _, p := range [...]string{"/workspace", "/tmp", "/dev/shm", "/proc"} {
		rules = append(rules, llRule{p, llRead | llWrite})
	}
	for _, n := range devNodes {
		rules = append(rules, llRule{"/dev/" + n, llFile &^ unix.LANDLOCK_ACCESS_FS_EXECUTE})
	}
	// The terminals (/dev/ptmx links to pts/ptmx): open, read, write and
	// their ioctls (a window size, a controlling tty); TIOCSTI and
	// TIOCLINUX stay refused by seccomp.
	rules = append(rules, llRule{"/dev/pts", llFile &^ unix.LANDLOCK_ACCESS_FS_EXECUTE})
	if len(mounts) > 0 {
		for _, m := range mounts {
			rules = append(rules, llRule{filepath.Join("/mnt", m), llRead | llWrite})
		}
	}
	return rules, nil
}

// isDirFollow says whether p is a directory, following a symlink (/bin
// is one to usr/bin on merged-/usr systems).
func isDirFollow(p string) bool {
	var st unix.Stat_t
	return unix.Stat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// applyLandlock restricts this thread, the one that execs, to the
// sandbox's rules; the program it execs inherits the domain, and neither
// it nor its children can leave it. Mode auto takes what the kernel's ABI
// has (nothing without Landlock); required makes no Landlock an error.
// It sets no_new_privs, as the seccomp filter does next.
func applyLandlock(mode string, mounts []string) error {
	if mode == LandlockOff {
		return nil
	}
	abi := min(kernelLandlockABI(), len(llHandled)-1)
	if abi == 0 {
		if mode == LandlockRequired {
			return ErrNoLandlock
		}
		return nil
	}
	fd, err := landlockRuleset(abi, mounts)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(fd), 0, 0); e != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", e)
	}
	return nil
}

// landlockRuleset makes the ruleset of ABI version abi (1 or more) with
// the sandbox's rules.
func landlockRuleset(abi int, mounts []string) (int, error) {
	handled := llHandled[abi]
	rules, err := landlockRules(mounts)
	if err != nil {
		return -1, fmt.Errorf("landlock rules: %w", err)
	}
	attr := unix.LandlockRulesetAttr{Handled_access_fs: handled}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), 8, 0)
	if e != 0 {
		return -1, fmt.Errorf("landlock_create_ruleset: %w", e)
	}
	for _, r := range rules {
		if err := addLandlockRule(int(fd), r.path, r.access&handled); err != nil {
			unix.Close(int(fd))
			return -1, err
		}
	}
	return int(fd), nil
}

// addLandlockRule allows access beneath path (a missing one is skipped;
// a file gets only the rights a file can have).
func addLandlockRule(ruleset int, path string, access uint64) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("landlock rule for %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("landlock rule for %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= llFile
	}
	attr := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&attr)), 0, 0, 0); e != 0 {
		return fmt.Errorf("landlock rule for %s: %w", path, e)
	}
	return nil
}
