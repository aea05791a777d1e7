package seccomp

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestLoadRejects(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"empty", ``, "EOF"},
		{"not json", `defaultAction: allow`, "invalid character"},
		{"trailing", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[]} {}`, "trailing data"},
		{"unknown field", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[],"flagz":1}`, `unknown field "flagz"`},
		{"typo args", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW","arg":[]}]}`, `unknown field "arg"`},
		{"missing default", `{"syscalls":[]}`, "defaultAction is missing"},
		{"unknown default", `{"defaultAction":"SCMP_ACT_DENY"}`, `unknown action "SCMP_ACT_DENY"`},
		{"notify", `{"defaultAction":"SCMP_ACT_NOTIFY"}`, "not supported"},
		{"unknown action", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["read"],"action":"SCMP_ACT_MAYBE"}]}`, `syscalls[0]: read: unknown action "SCMP_ACT_MAYBE"`},
		{"missing action", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["read"]}]}`, "action is missing"},
		{"no names", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"action":"SCMP_ACT_ERRNO"}]}`, "no syscall names"},
		{"empty name", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":[""],"action":"SCMP_ACT_ERRNO"}]}`, "empty syscall name"},
		{"unknown op", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["socket"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":1,"op":"SCMP_CMP_LIKE"}]}]}`, `unknown op "SCMP_CMP_LIKE"`},
		{"arg index", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["socket"],"action":"SCMP_ACT_ALLOW","args":[{"index":6,"value":1,"op":"SCMP_CMP_EQ"}]}]}`, "index 6 out of range"},
		{"valueTwo without mask", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["socket"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":1,"valueTwo":2,"op":"SCMP_CMP_EQ"}]}]}`, "valueTwo is only used by SCMP_CMP_MASKED_EQ"},
		{"same arg twice", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["socket"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":1,"op":"SCMP_CMP_NE"},{"index":0,"value":2,"op":"SCMP_CMP_NE"}]}]}`, "second comparison on argument 0"},
		{"unknown arch", `{"defaultAction":"SCMP_ACT_ERRNO","architectures":["SCMP_ARCH_VAX"]}`, `unknown architecture "SCMP_ARCH_VAX"`},
		{"unknown archMap", `{"defaultAction":"SCMP_ACT_ERRNO","archMap":[{"architecture":"SCMP_ARCH_X86_64","subArchitectures":["SCMP_ARCH_Z80"]}]}`, `unknown subArchitecture "SCMP_ARCH_Z80"`},
		{"unknown includes arch", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW","includes":{"arches":["vax"]}}]}`, `includes: unknown arch "vax"`},
		{"bad cap", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW","excludes":{"caps":["SYS_ADMIN"]}}]}`, `capability "SYS_ADMIN"`},
		{"bad minKernel", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW","includes":{"minKernel":"four"}}]}`, `kernel version "four"`},
		{"errnoRet on allow", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW","errnoRet":1}]}`, "errnoRet 1 given for SCMP_ACT_ALLOW"},
		{"errnoRet range", `{"defaultAction":"SCMP_ACT_ERRNO","defaultErrnoRet":70000}`, "errnoRet 70000 out of range"},
		{"negative value", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["socket"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":-1,"op":"SCMP_CMP_EQ"}]}]}`, "cannot unmarshal number -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Load(strings.NewReader(tc.json))
			if err == nil {
				t.Fatalf("Load accepted %s: %+v", tc.json, p)
			}
			if !errors.Is(err, ErrInvalidProfile) {
				t.Errorf("error %v does not wrap ErrInvalidProfile", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestLoadTestdata(t *testing.T) {
	f, err := os.Open("testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	p, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	if p.DefaultAction != ActAllow || len(p.Syscalls) != 8 {
		t.Fatalf("got default %s and %d entries, want SCMP_ACT_ALLOW and 8", p.DefaultAction, len(p.Syscalls))
	}
	if got := p.Syscalls[0]; got.ErrnoRet == nil || *got.ErrnoRet != 13 || got.Names[0] != "getppid" {
		t.Errorf("first entry = %+v, want getppid errnoRet 13", got)
	}
}

func TestLoadLegacyName(t *testing.T) {
	p, err := Load(strings.NewReader(`{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"name":"read","action":"SCMP_ACT_ALLOW"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Syscalls[0].Names; len(got) != 1 || got[0] != "read" {
		t.Errorf("names = %q, want [read]", got)
	}
}

func TestDefaultProfileContents(t *testing.T) {
	p, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if p.DefaultAction != ActErrno || p.DefaultErrnoRet == nil || *p.DefaultErrnoRet != 1 {
		t.Fatalf("default action %s/%v, want SCMP_ACT_ERRNO/1", p.DefaultAction, p.DefaultErrnoRet)
	}
	removed := []string{
		"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "bpf",
		"perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
		"keyctl", "add_key", "request_key", "mount", "umount", "umount2", "pivot_root", "move_mount",
		"fsopen", "fsconfig", "fsmount", "fspick", "open_tree", "mount_setattr", "unshare", "setns",
		"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
		"acct", "iopl", "ioperm", "clock_settime", "clock_settime64", "settimeofday", "stime",
		"adjtimex", "clock_adjtime", "clock_adjtime64", "syslog", "open_by_handle_at",
		"name_to_handle_at", "lookup_dcookie", "quotactl", "quotactl_fd", "uselib", "vm86", "vm86old",
		"chroot", "clone3",
	}
	for _, s := range p.Syscalls {
		if s.Action != ActAllow {
			continue
		}
		for _, n := range s.Names {
			for _, r := range removed {
				if n == r {
					t.Errorf("default profile allows %s", n)
				}
			}
		}
	}
}

func TestParseKernelVersion(t *testing.T) {
	tests := []struct {
		in      string
		want    kernelVersion
		wantErr bool
	}{
		{"6.18", kernelVersion{6, 18}, false},
		{"4.8.0", kernelVersion{4, 8}, false},
		{"6.1.0-28-amd64", kernelVersion{6, 1}, false},
		{"6.18.0+", kernelVersion{6, 18}, false},
		{"6", kernelVersion{}, true},
		{"", kernelVersion{}, true},
		{"a.b", kernelVersion{}, true},
	}
	for _, tc := range tests {
		got, err := parseKernelVersion(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseKernelVersion(%q) = %v, %v; want %v, err %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestApplies(t *testing.T) {
	kv := kernelVersion{6, 1}
	tests := []struct {
		name string
		s    Syscall
		want bool
	}{
		{"plain", Syscall{}, true},
		{"includes cap", Syscall{Includes: &Filter{Caps: []string{"CAP_SYS_ADMIN"}}}, false},
		{"excludes cap", Syscall{Excludes: &Filter{Caps: []string{"CAP_SYS_ADMIN"}}}, true},
		{"includes native arch", Syscall{Includes: &Filter{Arches: []string{"x86", "amd64"}}}, true},
		{"includes other arch", Syscall{Includes: &Filter{Arches: []string{"s390x"}}}, false},
		{"excludes native arch", Syscall{Excludes: &Filter{Arches: []string{"amd64"}}}, false},
		{"excludes other arch", Syscall{Excludes: &Filter{Arches: []string{"s390x"}}}, true},
		{"minKernel met", Syscall{Includes: &Filter{MinKernel: "4.8"}}, true},
		{"minKernel equal", Syscall{Includes: &Filter{MinKernel: "6.1"}}, true},
		{"minKernel unmet", Syscall{Includes: &Filter{MinKernel: "6.2"}}, false},
		{"excludes minKernel met", Syscall{Excludes: &Filter{MinKernel: "5.0"}}, false},
		{"excludes minKernel unmet", Syscall{Excludes: &Filter{MinKernel: "7.0"}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.applies("amd64", kv); got != tc.want {
				t.Errorf("applies = %v, want %v", got, tc.want)
			}
		})
	}
}

func FuzzLoad(f *testing.F) {
	f.Add(defaultJSON)
	if b, err := os.ReadFile("testdata/small.json"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"name":"read","names":null,"action":"SCMP_ACT_ALLOW","args":[{"index":5,"value":18446744073709551615,"valueTwo":1,"op":"SCMP_CMP_MASKED_EQ"}],"includes":{"minKernel":"1.2"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Load(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrInvalidProfile) {
				t.Fatalf("error %v does not wrap ErrInvalidProfile", err)
			}
			return
		}
		for _, s := range p.Syscalls {
			_ = s.applies("amd64", kernelVersion{6, 18})
		}
	})
}
