package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func openFixture(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func mountsFixture(t *testing.T, name string) []Mount {
	t.Helper()
	m, err := ParseMountinfo(openFixture(t, name))
	if err != nil {
		t.Fatalf("ParseMountinfo(%s): %v", name, err)
	}
	return m
}

func procCgroupFixture(t *testing.T, name string) map[string]string {
	t.Helper()
	m, err := ParseProcCgroup(openFixture(t, name))
	if err != nil {
		t.Fatalf("ParseProcCgroup(%s): %v", name, err)
	}
	return m
}

func TestParseProcCgroup(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		in      string
		want    map[string]string
		wantErr bool
	}{
		{name: "hybrid host", fixture: "hybrid-proc-cgroup", want: map[string]string{
			"name=systemd": "/", "pids": "/", "blkio": "/", "freezer": "/", "devices": "/",
			"memory": "/process_api/216498d4bd190430ae9b4ca3b085aa35", "cpuset": "/",
			"cpuacct": "/", "cpu": "/", "": "/",
		}},
		{name: "pure v2", fixture: "v2-proc-cgroup", want: map[string]string{"": "/system.slice/nsbox.service"}},
		{name: "co-mounted", in: "4:cpu,cpuacct:/a/b\n0::/a\n", want: map[string]string{"cpu": "/a/b", "cpuacct": "/a/b", "": "/a"}},
		{name: "colon in path", in: "0::/a:b\n", want: map[string]string{"": "/a:b"}},
		{name: "empty", in: "", want: map[string]string{}},
		{name: "two fields", in: "0:/a\n", wantErr: true},
		{name: "relative path", in: "0::a\n", wantErr: true},
		{name: "bad id", in: "x::/\n", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got map[string]string
			var err error
			if tc.fixture != "" {
				got, err = ParseProcCgroup(openFixture(t, tc.fixture))
			} else {
				got, err = ParseProcCgroup(strings.NewReader(tc.in))
			}
			if tc.wantErr {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("err = %v, want ErrMalformed", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseMountinfo(t *testing.T) {
	hybrid := mountsFixture(t, "hybrid-mountinfo")
	if len(hybrid) != 20 {
		t.Fatalf("hybrid: %d mounts, want 20", len(hybrid))
	}
	want := Mount{Root: "/", Mountpoint: "/sys/fs/cgroup/memory", FSType: "cgroup", Source: "cgroup", Options: "rw,relatime", SuperOptions: "rw,memory"}
	if hybrid[13] != want {
		t.Errorf("hybrid[13] = %+v, want %+v", hybrid[13], want)
	}
	v2 := mountsFixture(t, "v2-mountinfo")
	want = Mount{Root: "/", Mountpoint: "/sys/fs/cgroup", FSType: "cgroup2", Source: "cgroup2", Options: "rw,nosuid,nodev,noexec,relatime", SuperOptions: "rw,nsdelegate,memory_recursiveprot"}
	if v2[8] != want {
		t.Errorf("v2[8] = %+v, want %+v", v2[8], want)
	}
	if got := v2[len(v2)-1].Mountpoint; got != "/var/lib/with space" {
		t.Errorf("escaped mountpoint = %q, want %q", got, "/var/lib/with space")
	}

	bad := []struct{ name, in string }{
		{"no separator", "1 2 0:1 / /x rw shared:1 tmpfs tmpfs rw\n"},
		{"short head", "1 2 0:1 / - tmpfs tmpfs rw\n"},
		{"short tail", "1 2 0:1 / /x rw - tmpfs\n"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseMountinfo(strings.NewReader(tc.in)); !errors.Is(err, ErrMalformed) {
				t.Errorf("err = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestParseControllers(t *testing.T) {
	tests := []struct {
		name, fixture, in string
		want              []string
	}{
		{name: "pure v2", fixture: "v2-controllers", want: []string{"cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc"}},
		{name: "hybrid unified", fixture: "hybrid-unified-controllers", want: []string{"hugetlb"}},
		{name: "empty", in: "\n", want: []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			var err error
			if tc.fixture != "" {
				got, err = ParseControllers(openFixture(t, tc.fixture))
			} else {
				got, err = ParseControllers(strings.NewReader(tc.in))
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDetectModeAndLocate(t *testing.T) {
	tests := []struct {
		name             string
		mountinfo, procs string
		mode             Mode
		unified          string
		v1               map[string]string
	}{
		{
			name: "hybrid host", mountinfo: "hybrid-mountinfo", procs: "hybrid-proc-cgroup",
			mode: ModeHybrid, unified: "/sys/fs/cgroup/unified",
			v1: map[string]string{
				"cpu": "/sys/fs/cgroup/cpu", "cpuacct": "/sys/fs/cgroup/cpuacct", "cpuset": "/sys/fs/cgroup/cpuset",
				"memory":  "/sys/fs/cgroup/memory/process_api/216498d4bd190430ae9b4ca3b085aa35",
				"devices": "/sys/fs/cgroup/devices", "freezer": "/sys/fs/cgroup/freezer", "blkio": "/sys/fs/cgroup/blkio",
				"pids": "/sys/fs/cgroup/pids", "name=systemd": "/sys/fs/cgroup/systemd",
			},
		},
		{
			name: "pure v2", mountinfo: "v2-mountinfo", procs: "v2-proc-cgroup",
			mode: ModeV2, unified: "/sys/fs/cgroup/system.slice/nsbox.service",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mounts := mountsFixture(t, tc.mountinfo)
			if got := DetectMode(mounts); got != tc.mode {
				t.Errorf("DetectMode = %q, want %q", got, tc.mode)
			}
			l := Locate(mounts, procCgroupFixture(t, tc.procs))
			if l.Mode != tc.mode || l.Unified != tc.unified || !reflect.DeepEqual(l.V1, tc.v1) {
				t.Errorf("Locate = %+v, want mode %q unified %q v1 %v", l, tc.mode, tc.unified, tc.v1)
			}
		})
	}
}

func TestDetectModeSynthetic(t *testing.T) {
	v1 := Mount{Root: "/", Mountpoint: "/sys/fs/cgroup/memory", FSType: "cgroup", SuperOptions: "rw,memory"}
	named := Mount{Root: "/", Mountpoint: "/sys/fs/cgroup/systemd", FSType: "cgroup", SuperOptions: "rw,xattr,name=systemd"}
	v2elsewhere := Mount{Root: "/", Mountpoint: "/mnt/cg2", FSType: "cgroup2"}
	tests := []struct {
		name   string
		mounts []Mount
		want   Mode
	}{
		{"nothing", nil, ModeUnavailable},
		{"only named v1", []Mount{named}, ModeUnavailable},
		{"v1 only", []Mount{v1, named}, ModeV1},
		{"v1 and cgroup2", []Mount{v1, v2elsewhere}, ModeHybrid},
		{"cgroup2 elsewhere", []Mount{v2elsewhere}, ModeV2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := DetectMode(tc.mounts); got != tc.want {
				t.Errorf("DetectMode = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLocateSubtreeMount(t *testing.T) {
	// A container that sees a bind mount of its own subtree without a
	// cgroup namespace.
	mounts := []Mount{{Root: "/docker/abc", Mountpoint: "/sys/fs/cgroup", FSType: "cgroup2"}}
	l := Locate(mounts, map[string]string{"": "/docker/abc/inner"})
	if l.Unified != "/sys/fs/cgroup/inner" {
		t.Errorf("Unified = %q, want /sys/fs/cgroup/inner", l.Unified)
	}
	l = Locate(mounts, map[string]string{"": "/elsewhere"})
	if l.Unified != "" {
		t.Errorf("Unified = %q for a path outside the mount, want empty", l.Unified)
	}
}

func TestParseKeyed(t *testing.T) {
	got := parseKeyed([]byte("oom_kill_disable 0\nunder_oom 0\noom_kill 3\nbogus\nx y\n"))
	want := map[string]int64{"oom_kill_disable": 0, "under_oom": 0, "oom_kill": 3}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func FuzzParseMountinfo(f *testing.F) {
	for _, name := range []string{"hybrid-mountinfo", "v2-mountinfo"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("1 2 0:1 /a\\040b /x\\134 rw - tmpfs \\011 rw\n")
	f.Fuzz(func(t *testing.T, in string) {
		mounts, err := ParseMountinfo(strings.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				// Only an over-long line may fail otherwise.
				if !strings.Contains(err.Error(), "too long") {
					t.Fatalf("unexpected error kind: %v", err)
				}
			}
			return
		}
		for _, m := range mounts {
			if m.FSType == "" || strings.Contains(m.FSType, " ") {
				t.Fatalf("bad fstype %q", m.FSType)
			}
			_ = m.Controllers()
		}
		_ = DetectMode(mounts)
	})
}
