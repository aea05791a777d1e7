package doctor

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nsbox/nsbox/cgroup"
)

// cgroupFixtures are shared with the cgroup package's parser tests; a
// proc-* directory there is a /proc with pid 1's mountinfo and cgroup.
const cgroupFixtures = "../../cgroup/testdata"

// goodHost returns the facts of a healthy host with the given cgroup layout.
func goodHost(t *testing.T, proc string) Facts {
	t.Helper()
	mounts, self, err := cgroup.ReadProc(filepath.Join(cgroupFixtures, proc), 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(cgroupFixtures, "v2-controllers"))
	if err != nil {
		t.Fatal(err)
	}
	return Facts{
		EUID:           0,
		MaxUserNS:      "96365\n",
		SeccompActions: "kill_process kill_thread trap errno user_notif trace log allow\n",
		LandlockABI:    7,
		Mounts:         mounts,
		ProcCgroup:     self,
		V2Controllers:  strings.Fields(string(b)),
		Filesystems:    "nodev\tsysfs\nnodev\tcgroup2\nnodev\toverlay\n\text4\n",
		Store:          "/var/lib/nsbox/rootfs",
		Rootfs:         []string{"default (datasci, python 3.11.2)"},
		Socket:         "/run/nsbox/nsbox.sock",
		InitBinary:     "/usr/local/bin/nsbox-init",
	}
}

func byName(checks []Check) map[string]Check {
	m := make(map[string]Check)
	for _, c := range checks {
		m[c.Name] = c
	}
	return m
}

func TestDiagnose(t *testing.T) {
	tests := []struct {
		name     string
		host     func(t *testing.T) Facts
		runnable bool
		want     map[string]Status // checks whose status is asserted
		detail   map[string]string // substrings the detail must hold
		verdict  string            // the verdict, when asserted
	}{
		{
			name:     "hybrid host (this machine)",
			host:     func(t *testing.T) Facts { return goodHost(t, "proc-hybrid") },
			runnable: true,
			want: map[string]Status{"root": StatusOK, "cgroup mode": StatusOK, "cgroup memory": StatusOK,
				"cgroup pids": StatusOK, "cgroup cpu": StatusOK, "CLONE_INTO_CGROUP": StatusOK, "daemon socket": StatusOK, "sandbox init": StatusOK,
				"volumes": StatusOK, "landlock": StatusOK},
			detail: map[string]string{
				"landlock":          "ABI v7",
				"cgroup mode":       "hybrid: v1 controllers at /sys/fs/cgroup/<ctrl>, empty cgroup2 at /sys/fs/cgroup/unified",
				"cgroup memory":     "/sys/fs/cgroup/memory/process_api/216498d4bd190430ae9b4ca3b085aa35",
				"CLONE_INTO_CGROUP": "n/a (v1: pids are moved with cgroup.procs)",
				"seccomp":           "kill_process kill_thread trap errno user_notif trace log allow",
			},
		},
		{
			name:     "pure v2 host",
			host:     func(t *testing.T) Facts { return goodHost(t, "proc-v2") },
			runnable: true,
			want:     map[string]Status{"cgroup mode": StatusOK, "cgroup memory": StatusOK, "cgroup pids": StatusOK, "cgroup cpu": StatusOK, "CLONE_INTO_CGROUP": StatusOK},
			detail: map[string]string{
				"cgroup mode":       "v2: cgroup2 at /sys/fs/cgroup, own cgroup /sys/fs/cgroup/system.slice/nsbox.service",
				"cgroup pids":       "/sys/fs/cgroup/system.slice/nsbox.service",
				"CLONE_INTO_CGROUP": "works",
			},
		},
		{
			name: "v2 without delegated memory, old kernel",
			host: func(t *testing.T) Facts {
				f := goodHost(t, "proc-v2")
				f.V2Controllers = []string{"cpu", "pids"}
				f.CloneIntoErr = syscall.EINVAL
				return f
			},
			want:   map[string]Status{"cgroup memory": StatusFail, "cgroup cpu": StatusOK, "CLONE_INTO_CGROUP": StatusWarn},
			detail: map[string]string{"cgroup memory": "memory not in /sys/fs/cgroup/system.slice/nsbox.service/cgroup.controllers"},
		},
		{
			name: "a required rootfs missing from the store (doctor --rootfs, a Kubernetes init container)",
			host: func(t *testing.T) Facts {
				f := goodHost(t, "proc-hybrid")
				f.Names = []string{"minimal", "default"}
				f.Required = []string{"default", "node"}
				return f
			},
			want:   map[string]Status{"rootfs default": StatusOK, "rootfs node": StatusFail},
			detail: map[string]string{"rootfs node": "not in "},
		},
		{
			name: "not root, no user namespaces, no daemon",
			host: func(t *testing.T) Facts {
				f := goodHost(t, "proc-hybrid")
				f.EUID = 1000
				f.MaxUserNS = "0\n"
				f.SocketErr = syscall.ENOENT
				return f
			},
			want:    map[string]Status{"root": StatusFail, "user namespaces": StatusFail},
			verdict: "uid 1000 cannot run sandboxes here yet: it needs a daemon's socket it may use (the daemon socket row) or root",
		},
		{
			// Issue 36: a user who only needs the socket was told "nsbox
			// cannot run here".
			name: "not root, the daemon's socket answers",
			host: func(t *testing.T) Facts {
				f := goodHost(t, "proc-hybrid")
				f.EUID = 1000
				return f
			},
			runnable: true,
			want:     map[string]Status{"root": StatusOK, "daemon socket": StatusOK},
			detail:   map[string]string{"root": "through the daemon at /run/nsbox/nsbox.sock"},
			verdict:  "nsbox can run here for uid 1000, through the daemon at /run/nsbox/nsbox.sock",
		},
		{
			name: "not root, the socket does not let the user in",
			host: func(t *testing.T) Facts {
				f := goodHost(t, "proc-hybrid")
				f.EUID = 1000
				f.SocketErr = syscall.EACCES
				return f
			},
			want:    map[string]Status{"root": StatusFail, "daemon socket": StatusWarn},
			detail:  map[string]string{"root": "does not let you in"},
			verdict: "uid 1000 cannot run sandboxes here yet: it needs a daemon's socket it may use (the daemon socket row) or root",
		},
		{
			name: "userns sysctl fine but clone refused",
			host: func(t *testing.T) Facts {
				f := goodHost(t, "proc-hybrid")
				f.UserNSErr = syscall.EPERM
				return f
			},
			want:   map[string]Status{"user namespaces": StatusFail},
			detail: map[string]string{"user namespaces": "clone(CLONE_NEWUSER) failed"},
		},
		{
			name: "no seccomp, no cgroups",
			host: func(t *testing.T) Facts {
				f := goodHost(t, "proc-hybrid")
				f.SeccompActionsErr = os.ErrNotExist
				f.SeccompActions = ""
				f.Mounts = nil
				return f
			},
			want: map[string]Status{"seccomp": StatusFail, "cgroup mode": StatusFail},
		},
		{
			name: "warnings only: no daemon, no store, no overlay, no pidfd",
			host: func(t *testing.T) Facts {
				f := goodHost(t, "proc-hybrid")
				f.SocketErr = syscall.ENOENT
				f.StoreErr = os.ErrNotExist
				f.Rootfs = nil
				f.Filesystems = "nodev\tsysfs\n"
				f.PidfdErr = syscall.ENOSYS
				f.InitBinary = ""
				return f
			},
			runnable: true,
			want: map[string]Status{"daemon socket": StatusWarn, "rootfs store": StatusWarn,
				"overlayfs": StatusWarn, "pidfd": StatusWarn, "sandbox init": StatusWarn},
		},
		{
			name: "empty store",
			host: func(t *testing.T) Facts {
				f := goodHost(t, "proc-hybrid")
				f.Rootfs = nil
				return f
			},
			runnable: true,
			want:     map[string]Status{"rootfs store": StatusWarn},
			detail:   map[string]string{"rootfs store": "no rootfs"},
		},
		{
			name: "no e2fsprogs",
			host: func(t *testing.T) Facts {
				f := goodHost(t, "proc-hybrid")
				f.VolumeTools = []string{"mkfs.ext4", "e2fsck"}
				return f
			},
			runnable: true, // runs and sessions work; volumes do not
			want:     map[string]Status{"volumes": StatusWarn},
			detail:   map[string]string{"volumes": "no mkfs.ext4, e2fsck"},
		},
		{
			name: "no Landlock in the kernel",
			host: func(t *testing.T) Facts {
				f := goodHost(t, "proc-hybrid")
				f.LandlockABI = 0
				return f
			},
			runnable: true, // with landlock = "auto"
			want:     map[string]Status{"landlock": StatusWarn},
			detail:   map[string]string{"landlock": `landlock = "required" refuses to start`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checks := Diagnose(tc.host(t))
			if got := Runnable(checks); got != tc.runnable {
				t.Errorf("runnable = %v, want %v; checks: %+v", got, tc.runnable, checks)
			}
			if v := Verdict(tc.host(t), checks); tc.verdict != "" && v != tc.verdict {
				t.Errorf("verdict %q, want %q", v, tc.verdict)
			}
			got := byName(checks)
			for name, st := range tc.want {
				c, ok := got[name]
				if !ok {
					t.Errorf("no %q check", name)
					continue
				}
				if c.Status != st {
					t.Errorf("%s: status %s (%s), want %s", name, c.Status, c.Detail, st)
				}
			}
			for name, sub := range tc.detail {
				if !strings.Contains(got[name].Detail, sub) {
					t.Errorf("%s: detail %q, want it to contain %q", name, got[name].Detail, sub)
				}
			}
			for _, c := range checks {
				if c.Status == StatusFail && c.Fix == "" {
					t.Errorf("%s fails without a FIX", c.Name)
				}
			}
		})
	}
}

func TestGatherFactsLive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("requires root: probes user namespaces and cgroups as the daemon would")
	}
	f := Gather(t.TempDir(), filepath.Join(t.TempDir(), "none.sock"))
	if f.CgroupErr != nil || f.UserNSErr != nil || f.PidfdErr != nil {
		t.Fatalf("facts: cgroup %v userns %v pidfd %v", f.CgroupErr, f.UserNSErr, f.PidfdErr)
	}
	if !errors.Is(f.SocketErr, syscall.ENOENT) {
		t.Errorf("SocketErr = %v, want ENOENT", f.SocketErr)
	}
	checks := byName(Diagnose(f))
	if checks["root"].Status != StatusOK || checks["cgroup mode"].Status != StatusOK {
		t.Errorf("checks: %+v", checks)
	}
}

// TestSocketFixNamesTheCause: a socket that refuses the user is not
// reported as a daemon to start.
func TestSocketFixNamesTheCause(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.EACCES)}, "usermod -aG nsbox"},
		{syscall.ECONNREFUSED, "stale socket"},
		{syscall.ENOENT, "start the daemon"},
	} {
		f := goodHost(t, "proc-hybrid")
		f.SocketErr = tc.err
		for _, c := range Diagnose(f) {
			if c.Name == "daemon socket" && !strings.Contains(c.Fix, tc.want) {
				t.Errorf("%v: fix %q, want it to say %q", tc.err, c.Fix, tc.want)
			}
		}
	}
}
