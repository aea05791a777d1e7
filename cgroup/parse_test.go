package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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

// procFixture reads testdata/<dir>/1/{mountinfo,cgroup} through ReadProc.
func procFixture(t *testing.T, dir string) ([]Mount, map[string]string) {
	t.Helper()
	mounts, self, err := ReadProc(filepath.Join("testdata", dir), 1)
	if err != nil {
		t.Fatalf("ReadProc(%s): %v", dir, err)
	}
	return mounts, self
}

// fakeProc writes a proc tree with pid 1's mountinfo and cgroup files and
// returns its root.
func fakeProc(t testing.TB, mountinfo, cgroup string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"mountinfo": mountinfo, "cgroup": cgroup} {
		if err := os.WriteFile(filepath.Join(root, "1", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestReadProcCgroup(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		in      string
		want    map[string]string
		wantErr bool
	}{
		{name: "hybrid host", fixture: "proc-hybrid", want: map[string]string{
			"name=systemd": "/", "pids": "/", "blkio": "/", "freezer": "/", "devices": "/",
			"memory": "/process_api/216498d4bd190430ae9b4ca3b085aa35", "cpuset": "/",
			"cpuacct": "/", "cpu": "/", "": "/",
		}},
		{name: "pure v2", fixture: "proc-v2", want: map[string]string{"": "/system.slice/nsbox.service"}},
		{name: "co-mounted", in: "4:cpu,cpuacct:/a/b\n0::/a\n", want: map[string]string{"cpu": "/a/b", "cpuacct": "/a/b", "": "/a"}},
		{name: "colon in path", in: "0::/a:b\n", want: map[string]string{"": "/a:b"}},
		{name: "empty", in: "", want: map[string]string{}},
		{name: "two fields", in: "0:/a\n", wantErr: true},
		{name: "relative path", in: "0::a\n", wantErr: true},
		{name: "bad id", in: "x::/\n", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join("testdata", tc.fixture)
			if tc.fixture == "" {
				root = fakeProc(t, "", tc.in)
			}
			_, got, err := ReadProc(root, 1)
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

func TestReadProcMountinfo(t *testing.T) {
	hybrid, _ := procFixture(t, "proc-hybrid")
	if len(hybrid) != 20 {
		t.Fatalf("hybrid: %d mounts, want 20", len(hybrid))
	}
	want := Mount{
		Root: "/", Mountpoint: "/sys/fs/cgroup/memory", FSType: "cgroup", Source: "cgroup",
		Options:      map[string]string{"rw": "", "relatime": ""},
		SuperOptions: map[string]string{"rw": "", "memory": ""},
	}
	if !reflect.DeepEqual(hybrid[13], want) {
		t.Errorf("hybrid[13] = %+v, want %+v", hybrid[13], want)
	}
	v2, _ := procFixture(t, "proc-v2")
	want = Mount{
		Root: "/", Mountpoint: "/sys/fs/cgroup", FSType: "cgroup2", Source: "cgroup2",
		Options:      map[string]string{"rw": "", "nosuid": "", "nodev": "", "noexec": "", "relatime": ""},
		SuperOptions: map[string]string{"rw": "", "nsdelegate": "", "memory_recursiveprot": ""},
	}
	if !reflect.DeepEqual(v2[8], want) {
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
			if _, _, err := ReadProc(fakeProc(t, tc.in, ""), 1); !errors.Is(err, ErrMalformed) {
				t.Errorf("err = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestMountControllers(t *testing.T) {
	hybrid, _ := procFixture(t, "proc-hybrid")
	var got []string
	for _, m := range hybrid {
		got = append(got, m.Controllers()...)
	}
	slices.Sort(got)
	want := []string{"blkio", "cpu", "cpuacct", "cpuset", "devices", "freezer", "memory", "name=systemd", "pids"}
	if !slices.Equal(got, want) {
		t.Errorf("controllers = %q, want %q", got, want)
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
		name    string
		proc    string // a directory of testdata
		mode    Mode
		unified string
		v1      map[string]string
	}{
		{
			name: "hybrid host", proc: "proc-hybrid",
			mode: ModeHybrid, unified: "/sys/fs/cgroup/unified",
			v1: map[string]string{
				"cpu": "/sys/fs/cgroup/cpu", "cpuacct": "/sys/fs/cgroup/cpuacct", "cpuset": "/sys/fs/cgroup/cpuset",
				"memory":  "/sys/fs/cgroup/memory/process_api/216498d4bd190430ae9b4ca3b085aa35",
				"devices": "/sys/fs/cgroup/devices", "freezer": "/sys/fs/cgroup/freezer", "blkio": "/sys/fs/cgroup/blkio",
				"pids": "/sys/fs/cgroup/pids", "name=systemd": "/sys/fs/cgroup/systemd",
			},
		},
		{
			name: "pure v2", proc: "proc-v2",
			mode: ModeV2, unified: "/sys/fs/cgroup/system.slice/nsbox.service",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mounts, self := procFixture(t, tc.proc)
			if got := DetectMode(mounts); got != tc.mode {
				t.Errorf("DetectMode = %q, want %q", got, tc.mode)
			}
			l := Locate(mounts, self)
			if l.Mode != tc.mode || l.Unified != tc.unified || !reflect.DeepEqual(l.V1, tc.v1) {
				t.Errorf("Locate = %+v, want mode %q unified %q v1 %v", l, tc.mode, tc.unified, tc.v1)
			}
		})
	}
}

func TestDetectModeSynthetic(t *testing.T) {
	v1 := Mount{Root: "/", Mountpoint: "/sys/fs/cgroup/memory", FSType: "cgroup", SuperOptions: map[string]string{"rw": "", "memory": ""}}
	named := Mount{Root: "/", Mountpoint: "/sys/fs/cgroup/systemd", FSType: "cgroup", SuperOptions: map[string]string{"rw": "", "xattr": "", "name": "systemd"}}
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

func TestKeyed(t *testing.T) {
	b := []byte("oom_kill_disable 7\nunder_oom 0\n oom_kill 3 \nbogus\nx y\nlast 9")
	for _, tc := range []struct {
		key  string
		want int64
	}{
		{"oom_kill", 3}, {"oom_kill_disable", 7}, {"under_oom", 0}, {"last", 9},
		{"oom", 0}, {"bogus", 0}, {"x", 0}, {"missing", 0},
	} {
		if got := keyed(b, tc.key); got != tc.want {
			t.Errorf("keyed(%q) = %d, want %d", tc.key, got, tc.want)
		}
	}
}

func FuzzReadProcMountinfo(f *testing.F) {
	for _, dir := range []string{"proc-hybrid", "proc-v2"} {
		b, err := os.ReadFile(filepath.Join("testdata", dir, "1", "mountinfo"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("1 2 0:1 /a\\040b /x\\134 rw - tmpfs \\011 rw\n")
	root := fakeProc(f, "", "0::/\n")
	f.Fuzz(func(t *testing.T, in string) {
		if err := os.WriteFile(filepath.Join(root, "1", "mountinfo"), []byte(in), 0o644); err != nil {
			t.Fatal(err)
		}
		mounts, _, err := ReadProc(root, 1)
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
