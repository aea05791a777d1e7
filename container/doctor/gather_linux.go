package doctor

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/cgroup"
	"github.com/nsbox/nsbox/container/sandboxinit"
	"github.com/nsbox/nsbox/rootfs"
)

// Gather looks at this host: it reads /proc, forks a no-op (noop) into a new
// user namespace (and on cgroup v2 into its own cgroup), lists the rootfs
// store and dials the daemon socket. It changes nothing.
func Gather(store, socket string) Facts {
	f := Facts{EUID: os.Geteuid(), Store: store, Socket: socket}

	var b []byte
	b, f.MaxUserNSErr = os.ReadFile("/proc/sys/user/max_user_namespaces")
	f.MaxUserNS = string(b)
	userns := noop()
	userns.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
	f.UserNSErr = userns.Run()

	b, f.SeccompActionsErr = os.ReadFile("/proc/sys/kernel/seccomp/actions_avail")
	f.SeccompActions = string(b)
	f.LandlockABI = sandboxinit.LandlockABI()

	f.Mounts, f.ProcCgroup, f.CgroupErr = cgroup.ReadSelf()
	if f.CgroupErr == nil {
		l := cgroup.Locate(f.Mounts, f.ProcCgroup)
		if l.Mode == cgroup.ModeV2 && l.Unified != "" {
			f.V2Controllers, f.V2ControlErr = readControllers(l.Unified + "/cgroup.controllers")
			f.CloneIntoErr = tryCloneInto(l.Unified)
		}
	}

	if fd, err := unix.PidfdOpen(os.Getpid(), 0); err != nil {
		f.PidfdErr = err
	} else {
		unix.Close(fd)
	}
	for _, tool := range []string{"mkfs.ext4", "e2fsck"} {
		if _, err := exec.LookPath(tool); err != nil {
			f.VolumeTools = append(f.VolumeTools, tool)
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		f.VolumeTools = append(f.VolumeTools, "/dev/loop-control")
	}
	b, _ = os.ReadFile("/proc/filesystems")
	f.Filesystems = string(b)
	if exe, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(exe), "nsbox-init"); isExecutable(p) {
			f.InitBinary = p
		}
	}

	if st, err := os.Stat(store); err != nil {
		f.StoreErr = err
	} else if !st.IsDir() {
		f.StoreErr = errors.New("not a directory")
	} else if list, err := (rootfs.Store{Root: store}).List(); err != nil {
		f.ListErr = err
	} else {
		for _, r := range list {
			desc := r.Name
			if r.Meta.Python != "" {
				desc += " (" + r.Meta.Profile + ", python " + r.Meta.Python + ")"
			} else if r.Meta.Profile != "" {
				desc += " (" + r.Meta.Profile + ")"
			}
			f.Rootfs = append(f.Rootfs, desc)
			f.Names = append(f.Names, r.Name)
		}
	}

	if conn, err := net.DialTimeout("unix", socket, time.Second); err != nil {
		var op *net.OpError
		if errors.As(err, &op) {
			err = op.Err // the path is already in the report
		}
		f.SocketErr = err
	} else {
		conn.Close()
	}
	return f
}

func readControllers(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return cgroup.ParseControllers(f)
}

// noop is a command that exits 0 at once: /bin/true, or where there is
// none (nsbox's own container image has no /bin) this binary with
// --version, which nsbox answers and exits.
func noop() *exec.Cmd {
	if isExecutable("/bin/true") {
		return exec.Command("/bin/true")
	}
	return exec.Command("/proc/self/exe", "--version")
}

// tryCloneInto starts a no-op with CLONE_INTO_CGROUP into this process's
// own cgroup: a real test of the feature that creates nothing.
func tryCloneInto(dir string) error {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(fd)
	cmd := noop()
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	return cmd.Run()
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}
