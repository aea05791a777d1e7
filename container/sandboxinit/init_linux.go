// Package sandboxinit is the init of every nsbox sandbox: the first process
// in its fresh namespaces. It receives its config from the engine, builds
// the mount tree, drops to the sandbox user, installs the seccomp filter and
// execs the command. It imports nothing heavy (no cgo, no logging or
// metrics libraries), so cmd/nsbox-init, a small binary made of this package
// alone, starts in about a millisecond; the nsbox binary can also act as
// init (MaybeRun), which is the fallback when no nsbox-init is installed.
package sandboxinit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/seccomp/filter"
)

// Arg0 is argv[0] of an init; MaybeRun keys on it and on Env so that
// nothing else ever takes the init path by accident.
const (
	Arg0 = "nsbox-init"
	Env  = "_NSBOX_INIT=1"
)

// File descriptors the engine hands to init (ExtraFiles order).
const (
	fdConfig  = 3 // socket: JSON Config + the workspace mount (SCM_RIGHTS), then EOF
	fdSync    = 4 // one byte once the child sits in its cgroup
	fdErr     = 5 // CLOEXEC: init writes a setup error here; EOF = exec happened
	fdControl = 6 // control socket; becomes fd 3 of the command when asked for
	// FDSelf is the sealed init binary, exec'd as /proc/self/fd/FDSelf.
	FDSelf = 7
)

// Config is everything init needs; the engine decides all of it.
type Config struct {
	Rootfs     string   `json:"rootfs"`
	Argv       []string `json:"argv"`
	Env        []string `json:"env"`
	Hostname   string   `json:"hostname"`
	TmpBytes   int64    `json:"tmp_bytes"`
	TmpInodes  int64    `json:"tmp_inodes"` // of /tmp and /dev/shm each (workspace.Inodes)
	NoFile     uint64   `json:"nofile"`
	FSizeBytes uint64   `json:"fsize_bytes"`
	UID        int      `json:"uid"`
	GID        int      `json:"gid"`
	Masked     []string `json:"masked"`
	ReadOnly   []string `json:"read_only"`
	Seccomp    []byte   `json:"seccomp"`
	CgroupNS   bool     `json:"cgroupns"` // unshare a cgroup namespace after placement
	Control    bool     `json:"control"`
	// Zygote keeps the command root in its user namespace, with its
	// capabilities and without a seccomp filter: a zygote writes its
	// children's id maps, and each child applies the filter itself.
	Zygote bool `json:"zygote,omitempty"`
	// Landlock is LandlockOff, LandlockAuto or LandlockRequired (""
	// is auto); a zygote's init applies none (its children mount).
	Landlock string `json:"landlock,omitempty"`
	// Mounts are the NAMEs of the detached mounts attached at /mnt/NAME.
	// With any, the workspace's fd is followed by the /mnt tmpfs's (with
	// a directory per NAME) and then theirs, in order.
	Mounts []string `json:"mounts,omitempty"`
	// Init makes pid 1 a reaper and the command its child (reaper_linux.go);
	// its binary's fd follows the workspace's.
	Init bool `json:"init,omitempty"`
}

// maxFDs is how many mount fds one config message may carry.
const maxFDs = 16

// MaybeRun runs the sandbox init when this process was started as one, and
// never returns in that case.
func MaybeRun() {
	if !Is() {
		return
	}
	Run()
}

// Is reports whether this process was started as a sandbox init.
func Is() bool {
	return len(os.Args) > 0 && os.Args[0] == Arg0 && os.Getenv("_NSBOX_INIT") == "1"
}

// Run is the init. It never returns: it execs the command, or reports a
// setup error to the engine and exits 127.
func Run() {
	// Namespaces, credentials and the seccomp filter belong to one thread;
	// the exec happens from it.
	runtime.LockOSThread()
	err := runInit()
	// Only failures get here: a successful exec never returns.
	errPipe := os.NewFile(fdErr, "init-err")
	fmt.Fprint(errPipe, message(err))
	os.Exit(127)
}

func runInit() error {
	cfg, fds, err := readConfig()
	if err != nil {
		return err
	}
	fds, reaper, err := takeReaper(&cfg, fds)
	if err != nil {
		return err
	}
	if err := setupMounts(&cfg, fds); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	if err := LoopbackUp(); err != nil {
		return fmt.Errorf("bring up lo: %w", err)
	}
	if err := setRlimits(&cfg); err != nil {
		return err
	}

	// Wait until the engine has placed us in our cgroup (v1 moves the pid
	// after clone; v2 clones straight into it and signals at once).
	sync := os.NewFile(fdSync, "init-sync")
	var b [1]byte
	if n, err := sync.Read(b[:]); n != 1 {
		return fmt.Errorf("wait for cgroup placement: %v", err)
	}
	sync.Close()
	if cfg.CgroupNS {
		if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
			return fmt.Errorf("unshare cgroup namespace: %w", err)
		}
	}

	path, err := lookPath(cfg.Argv[0], cfg.Env)
	if err != nil {
		return err
	}
	if !cfg.Zygote {
		if err := dropPrivileges(cfg.UID, cfg.GID); err != nil {
			return err
		}
	}
	if err := unix.Chdir("/workspace"); err != nil {
		return fmt.Errorf("chdir /workspace: %w", err)
	}
	// Nothing but stdin, stdout, stderr (and the control socket as fd 3,
	// when asked for) crosses the exec.
	first := uint(3)
	if cfg.Control {
		if err := unix.Dup3(fdControl, 3, 0); err != nil {
			return fmt.Errorf("control socket: %w", err)
		}
		first = 4
	}
	if err := unix.CloseRange(first, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("close_range: %w", err)
	}
	if err := resetSignals(); err != nil {
		return fmt.Errorf("reset signals: %w", err)
	}
	if !cfg.Zygote {
		if err := applyLandlock(cfg.Landlock, cfg.Mounts); err != nil {
			return err
		}
		if err := filter.Install(cfg.Seccomp); err != nil {
			return fmt.Errorf("install seccomp filter: %w", err)
		}
	}
	if cfg.Init {
		return execReaper(reaper, path, &cfg)
	}
	return execFailed(cfg.Argv[0], unix.Exec(path, cfg.Argv, cfg.Env))
}

// readConfig receives the config and the mounts' fds (the workspace's
// first) from the engine; it blocks until the engine has a run for this
// init.
func readConfig() (Config, []int, error) {
	var cfg Config
	var data []byte
	var fds []int
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(4*maxFDs))
	for {
		n, oobn, _, _, err := unix.Recvmsg(fdConfig, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return cfg, nil, fmt.Errorf("read config: %w", err)
		}
		if oobn > 0 {
			msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
			if err != nil {
				return cfg, nil, fmt.Errorf("read config: %w", err)
			}
			for _, m := range msgs {
				if got, err := unix.ParseUnixRights(&m); err == nil && len(fds) == 0 {
					fds = got
				}
			}
		}
		if n == 0 {
			break
		}
		data = append(data, buf[:n]...)
	}
	unix.Close(fdConfig)
	if len(fds) == 0 {
		return cfg, nil, fmt.Errorf("read config: no workspace mount received")
	}
	// An init older than the engine must fail loudly on what it does not
	// know (e.g. a zygote's config), not run without it.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return cfg, nil, fmt.Errorf("read config (is nsbox-init as new as nsbox?): %w", err)
	}
	if want := mountFDs(len(cfg.Mounts)) + reaperFDs(cfg.Init); len(fds) != want {
		return cfg, nil, fmt.Errorf("read config: %d mounts received, want %d", len(fds), want)
	}
	return cfg, fds, nil
}

// setupMounts builds the sandbox's mount tree on an overlay of the rootfs and
// pivots into it. Everything happens in the sandbox's own mount namespace.
func setupMounts(cfg *Config, fds []int) error {
	workspace := fds[0]
	// Nothing we mount may propagate back to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	root := cfg.Rootfs
	if err := mountRootfs(root); err != nil {
		return err
	}
	at := func(p string) string { return filepath.Join(root, p) }

	if err := unix.Mount("proc", at("proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	tmpOpts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=1777", cfg.TmpBytes, cfg.TmpInodes)
	if err := setupDev(at("dev"), tmpOpts); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", at("tmp"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, tmpOpts); err != nil {
		return fmt.Errorf("mount /tmp: %w", err)
	}
	if err := unix.MoveMount(workspace, "", unix.AT_FDCWD, at("workspace"), unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach /workspace: %w", err)
	}
	unix.Close(workspace)
	if err := mountHome(root); err != nil {
		return err
	}
	if err := mountUnderMnt(root, cfg.Mounts, fds[1:]); err != nil {
		return err
	}

	for _, p := range cfg.Masked {
		if err := maskPath(at(p), at("dev/null")); err != nil {
			return err
		}
	}
	for _, p := range cfg.ReadOnly {
		if err := readOnlyBind(at(p)); err != nil {
			return err
		}
	}
	if err := remountReadOnly(root); err != nil {
		return fmt.Errorf("make rootfs read-only: %w", err)
	}

	// pivot_root(".", ".") and detach the old root, as runc does.
	if err := unix.Chdir(root); err != nil {
		return fmt.Errorf("chdir rootfs: %w", err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	return unix.Chdir("/")
}

// HomeUser is where a sandbox sees its workspace a second time: the home
// directory E2B's SDKs and templates expect. The same tmpfs, so
// /home/user/x is /workspace/x.
const HomeUser = "/home/user"

// homeOpts is the tmpfs that holds the /home/user mount point on a rootfs
// whose /home lacks one: it only needs the one directory.
const homeOpts = "size=4k,nr_inodes=4,mode=755"

// mountHome binds the workspace (already at root/workspace) onto
// root/home/user. The rootfs is read-only and usually has an empty /home,
// so a tiny tmpfs covers /home to hold the mount point and is made
// read-only after. A rootfs that has /home/user gets the bind alone; one
// with no /home (or a symlink there, never followed) gets nothing.
func mountHome(root string) error {
	home := filepath.Join(root, "home")
	user := filepath.Join(home, "user")
	ws := filepath.Join(root, "workspace")
	if !isDir(home) {
		return nil
	}
	const tmpfsFlags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	covered := !isDir(user)
	if covered {
		if err := unix.Mount("tmpfs", home, "tmpfs", tmpfsFlags, homeOpts); err != nil {
			return fmt.Errorf("mount /home: %w", err)
		}
		if err := unix.Mkdir(user, 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", HomeUser, err)
		}
	}
	if err := unix.Mount(ws, user, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind /workspace on %s: %w", HomeUser, err)
	}
	if covered {
		if err := unix.Mount("", home, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|tmpfsFlags, ""); err != nil {
			return fmt.Errorf("remount /home read-only: %w", err)
		}
	}
	return nil
}

// mountFDs is how many fds a config with n Mounts comes with.
func mountFDs(n int) int {
	if n == 0 {
		return 1
	}
	return 2 + n
}

// mountUnderMnt attaches fds[0], the engine's read-only tmpfs holding a
// directory per name, at root/mnt (the rootfs is read-only and its /mnt
// has no mount points), then fds[1+i] at root/mnt/names[i]. The names
// were checked by the engine (one safe path element each); the rootfs
// must have a /mnt directory (a symlink there is never followed).
func mountUnderMnt(root string, names []string, fds []int) error {
	if len(names) == 0 {
		return nil
	}
	mnt := filepath.Join(root, "mnt")
	if !isDir(mnt) {
		return fmt.Errorf("mount under /mnt: the rootfs has no /mnt directory")
	}
	if err := unix.MoveMount(fds[0], "", unix.AT_FDCWD, mnt, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach /mnt: %w", err)
	}
	unix.Close(fds[0])
	for i, name := range names {
		if strings.ContainsRune(name, '/') || name == "" || name == "." || name == ".." {
			return fmt.Errorf("mount under /mnt: bad name %q", name)
		}
		if err := unix.MoveMount(fds[1+i], "", unix.AT_FDCWD, filepath.Join(mnt, name), unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("attach /mnt/%s: %w", name, err)
		}
		unix.Close(fds[1+i])
	}
	return nil
}

// isDir says whether p is a directory, not following a symlink at p.
func isDir(p string) bool {
	var st unix.Stat_t
	return unix.Lstat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// devNodes are the only devices a sandbox sees; they are bind mounts of the
// host's nodes (a user namespace cannot mknod).
var devNodes = [...]string{"null", "zero", "full", "random", "urandom"}

func setupDev(dev, shmOpts string) error {
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "size=64k,mode=755"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, n := range devNodes {
		p := filepath.Join(dev, n)
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
		if err != nil {
			return fmt.Errorf("create /dev/%s: %w", n, err)
		}
		f.Close()
		if err := unix.Mount("/dev/"+n, p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", n, err)
		}
	}
	links := [][2]string{
		{"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"},
		{"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"},
	}
	for _, l := range links {
		if err := os.Symlink(l[0], filepath.Join(dev, l[1])); err != nil {
			return fmt.Errorf("link /dev/%s: %w", l[1], err)
		}
	}
	if err := setupPts(dev); err != nil {
		return err
	}
	shm := filepath.Join(dev, "shm")
	if err := os.Mkdir(shm, 0o1777); err != nil {
		return fmt.Errorf("mkdir /dev/shm: %w", err)
	}
	if err := unix.Mount("tmpfs", shm, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, shmOpts); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	return unix.Mount("", dev, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, "")
}

// maskPath hides a /proc path: /dev/null over files, an empty read-only
// tmpfs over directories. Paths the kernel does not have are skipped.
func maskPath(p, devNull string) error {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("mask %s: %w", p, err)
	}
	var err error
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		err = unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=0")
	} else {
		err = unix.Mount(devNull, p, "", unix.MS_BIND, "")
	}
	if err != nil {
		return fmt.Errorf("mask %s: %w", p, err)
	}
	return nil
}

func readOnlyBind(p string) error {
	if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("bind %s: %w", p, err)
	}
	return remountReadOnly(p)
}

// remountReadOnly remounts a bind mount read-only, keeping the flags the
// kernel locked on it when the mount namespace was created (nosuid, nodev,
// noexec and atime flags must be preserved inside a user namespace).
func remountReadOnly(p string) error {
	var sfs unix.Statfs_t
	if err := unix.Statfs(p, &sfs); err != nil {
		return err
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV)
	for _, f := range [...]struct{ st, ms uintptr }{
		{unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME},
		{unix.ST_NODIRATIME, unix.MS_NODIRATIME},
		{unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if uintptr(sfs.Flags)&f.st != 0 {
			flags |= f.ms
		}
	}
	if err := unix.Mount("", p, "", flags, ""); err != nil {
		return fmt.Errorf("remount %s read-only: %w", p, err)
	}
	return nil
}

// LoopbackUp sets IFF_UP on lo, the only interface of a fresh netns, in
// the calling thread's namespace (the daemon's egress proxy uses it too).
func LoopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

func setRlimits(cfg *Config) error {
	for _, l := range [...]struct {
		res int
		val uint64
		nm  string
	}{
		{unix.RLIMIT_NOFILE, cfg.NoFile, "NOFILE"},
		{unix.RLIMIT_CORE, 0, "CORE"},
		{unix.RLIMIT_FSIZE, cfg.FSizeBytes, "FSIZE"},
	} {
		if err := unix.Setrlimit(l.res, &unix.Rlimit{Cur: l.val, Max: l.val}); err != nil {
			return fmt.Errorf("setrlimit %s: %w", l.nm, err)
		}
	}
	return nil
}

// dropPrivileges leaves in-sandbox root for uid/gid with no capabilities at
// all (bounding set emptied first, while CAP_SETPCAP is still held) and
// re-arms the parent-death signal that a credential change clears. Raw
// syscalls act on this thread only, which is the one that execs.
func dropPrivileges(uid, gid int) error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
		return fmt.Errorf("setresgid %d: %w", gid, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
		return fmt.Errorf("setresuid %d: %w", uid, e)
	}
	// setresuid away from 0 cleared permitted and effective; clear the rest.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	return unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0)
}

// lookPath resolves a command inside the new root with the run's PATH.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if unix.Access(p, unix.X_OK) == nil {
			var st unix.Stat_t
			if unix.Stat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("%s: command not found in PATH %s", name, path)
}

// resetSignals gives the command default signal dispositions and an empty
// signal mask. exec keeps SIG_IGN and the mask, so a signal ignored by
// whoever started the daemon (SIGINT and SIGQUIT for a shell's background
// job, SIGHUP under nohup) would be ignored by every sandboxed program too.
// Only ignored signals are touched: those Go handles, exec resets itself.
func resetSignals() error {
	// The kernel's struct sigaction; a zero one is SIG_DFL, no flags, no
	// mask, on every architecture (the handler comes first).
	type sigaction struct{ handler, flags, restorer, mask uint64 }
	const sigIgn = 1
	for sig := 1; sig <= 64; sig++ {
		if sig == int(unix.SIGKILL) || sig == int(unix.SIGSTOP) {
			continue
		}
		var old sigaction
		if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0); e != 0 {
			continue // a number this kernel does not have
		}
		if old.handler != sigIgn {
			continue
		}
		var dfl sigaction
		if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0); e != 0 {
			return fmt.Errorf("signal %d: %w", sig, e)
		}
	}
	return unix.PthreadSigmask(unix.SIG_SETMASK, &unix.Sigset_t{}, nil)
}
