package seccomp

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The attack tests re-exec the test binary. The child installs the
// Program found at envProg, performs the attempt named by envAttempt and
// prints "errno=N" (0 for success). A filter that kills shows up as the
// child dying of SIGSYS.
const (
	envChild   = "NSBOX_SECCOMP_TEST_CHILD"
	envProg    = "NSBOX_SECCOMP_TEST_PROG"
	envAttempt = "NSBOX_SECCOMP_TEST_ATTEMPT"
	envDir     = "NSBOX_SECCOMP_TEST_DIR"
)

// childMain runs in the re-exec'd test binary, on the locked main thread.
func childMain() int {
	runtime.LockOSThread()
	prog, err := os.ReadFile(os.Getenv(envProg))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	attempt, ok := attempts()[os.Getenv(envAttempt)]
	if !ok {
		fmt.Fprintln(os.Stderr, "child: unknown attempt", os.Getenv(envAttempt))
		return 2
	}
	start := time.Now()
	if err := Program(prog).Install(); err != nil {
		fmt.Fprintln(os.Stderr, "child: install:", err)
		return 3
	}
	took := time.Since(start)
	errno := attempt(os.Getenv(envDir))
	fmt.Printf("errno=%d install_ns=%d\n", int(errno), took.Nanoseconds())
	return 0
}

func raw(nr uintptr, a ...uintptr) unix.Errno {
	var args [6]uintptr
	copy(args[:], a)
	_, _, e := unix.RawSyscall6(nr, args[0], args[1], args[2], args[3], args[4], args[5])
	return e
}

func errOf(err error) unix.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(unix.Errno); ok {
		return e
	}
	return unix.EIO
}

func ptr(s string) uintptr {
	b, _ := unix.BytePtrFromString(s)
	return uintptr(unsafe.Pointer(b))
}

// attempts are chosen so that, without the filter, the kernel would answer
// with a different errno (bad fd, missing path, invalid flag combination)
// and never change the host: the expected EPERM proves the filter.
func attempts() map[string]func(dir string) unix.Errno {
	const (
		afALG   = 38
		afVSOCK = 40
		x32Bit  = 0x40000000
	)
	cloneNS := func(flag uintptr) func(string) unix.Errno {
		// CLONE_THREAD without CLONE_SIGHAND is EINVAL for the kernel.
		return func(string) unix.Errno { return raw(unix.SYS_CLONE, flag|unix.CLONE_THREAD) }
	}
	ioctl := func(cmd uintptr) func(string) unix.Errno {
		return func(string) unix.Errno {
			var c byte = 'x'
			return raw(unix.SYS_IOCTL, 0, cmd, uintptr(unsafe.Pointer(&c)))
		}
	}
	socket := func(domain, typ int) func(string) unix.Errno {
		return func(string) unix.Errno {
			fd, err := unix.Socket(domain, typ, 0)
			if err == nil {
				unix.Close(fd)
			}
			return errOf(err)
		}
	}
	personality := func(p uintptr) func(string) unix.Errno {
		return func(string) unix.Errno { return raw(unix.SYS_PERSONALITY, p) }
	}
	return map[string]func(string) unix.Errno{
		// Denied by the default profile.
		"mount": func(string) unix.Errno {
			return raw(unix.SYS_MOUNT, ptr("none"), ptr("/nonexistent-nsbox"), ptr("tmpfs"), 0, 0)
		},
		"umount2":    func(string) unix.Errno { return raw(unix.SYS_UMOUNT2, ptr("/nonexistent-nsbox"), 0) },
		"pivot_root": func(string) unix.Errno { return raw(unix.SYS_PIVOT_ROOT, ptr("/nonexistent-a"), ptr("/nonexistent-b")) },
		"chroot":     func(string) unix.Errno { return raw(unix.SYS_CHROOT, ptr("/nonexistent-nsbox")) },
		"fsopen":     func(string) unix.Errno { return raw(unix.SYS_FSOPEN, ptr("nsbox-nofs"), 0) },
		"open_tree":  func(string) unix.Errno { return raw(unix.SYS_OPEN_TREE, ^uintptr(0), ptr("/nonexistent-nsbox"), 0) },
		"move_mount": func(string) unix.Errno {
			return raw(unix.SYS_MOVE_MOUNT, ^uintptr(0), ptr(""), ^uintptr(0), ptr(""), 0)
		},
		"unshare-user":                  func(string) unix.Errno { return raw(unix.SYS_UNSHARE, unix.CLONE_NEWUSER) },
		"unshare-ns":                    func(string) unix.Errno { return raw(unix.SYS_UNSHARE, unix.CLONE_NEWNS) },
		"setns":                         func(string) unix.Errno { return raw(unix.SYS_SETNS, ^uintptr(0), 0) },
		"ptrace-traceme":                func(string) unix.Errno { return raw(unix.SYS_PTRACE, unix.PTRACE_TRACEME) },
		"process_vm_readv":              func(string) unix.Errno { return raw(unix.SYS_PROCESS_VM_READV, 0x7fffffff, 0, 0, 0, 0, 0) },
		"kcmp":                          func(string) unix.Errno { return raw(unix.SYS_KCMP, 0x7fffffff, 0x7fffffff, 0, 0, 0) },
		"pidfd_getfd":                   func(string) unix.Errno { return raw(unix.SYS_PIDFD_GETFD, ^uintptr(0), 0, 0) },
		"bpf":                           func(string) unix.Errno { return raw(unix.SYS_BPF, 0x7fff, 0, 0) },
		"perf_event_open":               func(string) unix.Errno { return raw(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0) },
		"keyctl":                        func(string) unix.Errno { return raw(unix.SYS_KEYCTL, 0xffff) },
		"add_key":                       func(string) unix.Errno { return raw(unix.SYS_ADD_KEY, 0, 0, 0, 0, 0) },
		"request_key":                   func(string) unix.Errno { return raw(unix.SYS_REQUEST_KEY, 0, 0, 0, 0) },
		"io_uring_setup":                func(string) unix.Errno { return raw(unix.SYS_IO_URING_SETUP, 0, 0) },
		"userfaultfd":                   func(string) unix.Errno { return raw(unix.SYS_USERFAULTFD, 0xffffffff) },
		"clone-newns":                   cloneNS(unix.CLONE_NEWNS),
		"clone-newuser":                 cloneNS(unix.CLONE_NEWUSER),
		"clone-newpid":                  cloneNS(unix.CLONE_NEWPID),
		"clone-newnet":                  cloneNS(unix.CLONE_NEWNET),
		"clone-newipc":                  cloneNS(unix.CLONE_NEWIPC),
		"clone-newuts":                  cloneNS(unix.CLONE_NEWUTS),
		"clone-newcgroup":               cloneNS(unix.CLONE_NEWCGROUP),
		"clone3":                        func(string) unix.Errno { return raw(unix.SYS_CLONE3, 0, 0) },
		"socket-af_alg":                 socket(afALG, unix.SOCK_SEQPACKET),
		"socket-af_vsock":               socket(afVSOCK, unix.SOCK_STREAM),
		"ioctl-tiocsti":                 ioctl(unix.TIOCSTI),
		"ioctl-tiocsti-hi":              ioctl(0x1_0000_0000 | unix.TIOCSTI),
		"ioctl-tiocsti-neg":             ioctl(0xffffffff_00000000 | unix.TIOCSTI),
		"ioctl-tioclinux":               ioctl(unix.TIOCLINUX),
		"ioctl-tioclinux-hi":            ioctl(0x8000_0000_0000_0000 | unix.TIOCLINUX),
		"personality-read-implies-exec": personality(0x0400000), // READ_IMPLIES_EXEC
		"personality-addr-no-randomize": personality(0x0040000),
		"x32-getpid":                    func(string) unix.Errno { return raw(x32Bit | unix.SYS_GETPID) },
		"kexec_load":                    func(string) unix.Errno { return raw(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0x7fff0000) },
		"init_module":                   func(string) unix.Errno { return raw(unix.SYS_INIT_MODULE, 0, 0, ptr("")) },
		"finit_module":                  func(string) unix.Errno { return raw(unix.SYS_FINIT_MODULE, ^uintptr(0), ptr(""), 0) },
		"delete_module":                 func(string) unix.Errno { return raw(unix.SYS_DELETE_MODULE, ptr("nsbox_nonexistent"), 0) },
		"reboot":                        func(string) unix.Errno { return raw(unix.SYS_REBOOT, 0, 0, 0, 0) },
		"acct":                          func(string) unix.Errno { return raw(unix.SYS_ACCT, ptr("/nonexistent-nsbox/acct")) },
		"iopl":                          func(string) unix.Errno { return raw(unix.SYS_IOPL, 0) },
		"ioperm":                        func(string) unix.Errno { return raw(unix.SYS_IOPERM, 0x80, 1, 0) },
		"syslog":                        func(string) unix.Errno { return raw(unix.SYS_SYSLOG, 10, 0, 0) },
		"settimeofday": func(string) unix.Errno {
			tv := unix.Timeval{Sec: 0, Usec: 2_000_000} // invalid: EINVAL without the filter
			return raw(unix.SYS_SETTIMEOFDAY, uintptr(unsafe.Pointer(&tv)), 0)
		},
		"clock_settime": func(string) unix.Errno {
			var ts unix.Timespec // CLOCK_MONOTONIC cannot be set: EINVAL without the filter
			return raw(unix.SYS_CLOCK_SETTIME, unix.CLOCK_MONOTONIC, uintptr(unsafe.Pointer(&ts)))
		},
		"adjtimex": func(string) unix.Errno {
			var tx unix.Timex // modes 0: a read
			return raw(unix.SYS_ADJTIMEX, uintptr(unsafe.Pointer(&tx)))
		},
		"open_by_handle_at": func(string) unix.Errno { return raw(unix.SYS_OPEN_BY_HANDLE_AT, ^uintptr(0), 0, 0) },
		"name_to_handle_at": func(string) unix.Errno { return raw(unix.SYS_NAME_TO_HANDLE_AT, ^uintptr(0), ptr("x"), 0, 0, 0) },
		"quotactl":          func(string) unix.Errno { return raw(unix.SYS_QUOTACTL, 0, 0, 0, 0) },
		"uselib":            func(string) unix.Errno { return raw(unix.SYS_USELIB, ptr("/nonexistent-nsbox")) },
		"tsync-other-thread": func(string) unix.Errno {
			// The filter was installed from the main thread with TSYNC:
			// a thread that already existed must be filtered too.
			done := make(chan unix.Errno)
			go func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				done <- raw(unix.SYS_UNSHARE, unix.CLONE_NEWUTS)
			}()
			return <-done
		},

		// Allowed by the default profile.
		"getpid": func(string) unix.Errno { return raw(unix.SYS_GETPID) },
		"file": func(dir string) unix.Errno {
			p := filepath.Join(dir, "f")
			if err := os.WriteFile(p, []byte("hello"), 0o600); err != nil {
				return errOf(unwrap(err))
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return errOf(unwrap(err))
			}
			if string(b) != "hello" {
				return unix.EIO
			}
			return 0
		},
		"fork-exec": func(string) unix.Errno {
			if err := exec.Command("/bin/true").Run(); err != nil {
				fmt.Fprintln(os.Stderr, "fork-exec:", err)
				return unix.EIO
			}
			return 0
		},
		"threads-gc": func(string) unix.Errno {
			done := make(chan []byte, 8)
			for range 8 {
				go func() { done <- make([]byte, 1<<20) }()
			}
			for range 8 {
				<-done
			}
			runtime.GC()
			return 0
		},
		"socket-af_inet":    socket(unix.AF_INET, unix.SOCK_STREAM),
		"socket-af_inet6":   socket(unix.AF_INET6, unix.SOCK_DGRAM),
		"socket-af_unix":    socket(unix.AF_UNIX, unix.SOCK_STREAM),
		"socket-af_netlink": socket(unix.AF_NETLINK, unix.SOCK_RAW),
		"ioctl-tcgets":      ioctl(unix.TCGETS), // fd 0 is /dev/null: ENOTTY from the kernel
		"personality-query": personality(0xffffffff),
		"personality-linux": personality(0),
		"python": func(dir string) unix.Errno {
			cmd := exec.Command("python3", "-I", "-c", pythonProbe, dir)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				fmt.Fprintln(os.Stderr, "python:", err)
				return unix.EIO
			}
			return 0
		},

		// Rules of testdata/small.json.
		"getppid":     func(string) unix.Errno { return raw(unix.SYS_GETPPID) },
		"getpgrp":     func(string) unix.Errno { return raw(unix.SYS_GETPGRP) },
		"getsid":      func(string) unix.Errno { return raw(unix.SYS_GETSID, 0) },
		"getpriority": func(string) unix.Errno { return raw(unix.SYS_GETPRIORITY, unix.PRIO_PROCESS, 0) },
		"getcpu":      func(string) unix.Errno { return raw(unix.SYS_GETCPU, 0, 0, 0) },
	}
}

// pythonProbe does what sandboxed Python commonly does: files, threads, a
// subprocess, sockets and a netlink-backed getaddrinfo.
const pythonProbe = `
import ctypes, os, socket, subprocess, sys, threading
d = sys.argv[1]
with open(os.path.join(d, "p.txt"), "w") as f: f.write("x")
assert open(os.path.join(d, "p.txt")).read() == "x"
t = threading.Thread(target=lambda: None); t.start(); t.join()
assert subprocess.run(["/bin/true"]).returncode == 0
socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
socket.getaddrinfo("localhost", 80)
libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare(0x10000000) != -1 or ctypes.get_errno() != 1:
    sys.exit("unshare(CLONE_NEWUSER) was not refused with EPERM")
`

func unwrap(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}
