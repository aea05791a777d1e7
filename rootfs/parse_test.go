package rootfs

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func openFixture(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestParseMmdebstrapProgress(t *testing.T) {
	var evs []Progress
	p := parseMmdebstrap(openFixture(t, "mmdebstrap-ok.txt"), func(ev Progress) { evs = append(evs, ev) })
	var phases []string
	maxPct := map[string]float64{}
	for _, ev := range evs {
		if len(phases) == 0 || phases[len(phases)-1] != ev.Phase {
			phases = append(phases, ev.Phase)
		}
		if ev.Percent > maxPct[ev.Phase] {
			maxPct[ev.Phase] = ev.Percent
		}
	}
	want := []string{"setup", "download", "extract", "install", "trim"}
	if !reflect.DeepEqual(phases, want) {
		t.Errorf("phases = %v, want %v", phases, want)
	}
	for _, ph := range []string{"download", "extract", "install"} {
		if maxPct[ph] < 90 {
			t.Errorf("phase %s reached %.0f%%, want a percentage from the progress bars", ph, maxPct[ph])
		}
	}
	if _, kind := p.failure(); kind != ErrBuildFailed {
		t.Errorf("failure() on a good run = %v", kind)
	}
}

func TestParseMmdebstrapFailures(t *testing.T) {
	tests := []struct {
		name    string
		input   func(t *testing.T) string
		want    error
		contain string
	}{
		{"mirror", func(t *testing.T) string {
			b, _ := os.ReadFile("testdata/mmdebstrap-mirror.txt")
			return string(b)
		}, ErrMirrorUnreachable, "127.0.0.1"},
		{"disk full", func(*testing.T) string {
			return "I: extracting archives...\r\ndpkg-deb: error: write: No space left on device\r\nE: mmdebstrap failed to run\r\n"
		}, ErrNoSpace, "No space"},
		{"other", func(*testing.T) string {
			return "I: installing remaining packages inside the chroot...\nE: Unable to locate package python3-nope\nE: mmdebstrap failed to run\n"
		}, ErrBuildFailed, "python3-nope"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := parseMmdebstrap(strings.NewReader(tc.input(t)), func(Progress) {})
			detail, kind := p.failure()
			if kind != tc.want || !strings.Contains(detail, tc.contain) {
				t.Errorf("failure() = %v, %q; want %v containing %q", kind, detail, tc.want, tc.contain)
			}
		})
	}
}

func TestParseDpkgStatus(t *testing.T) {
	got, err := parseDpkgStatus(openFixture(t, "dpkg-status.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Package{{"adduser", "3.134"}, {"python3", "3.11.2-1+b1"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if v := pythonVersion(t.TempDir(), got); v != "3.11.2" {
		t.Errorf("pythonVersion = %q", v)
	}
}

func TestMountsUnder(t *testing.T) {
	tests := []struct {
		dir  string
		want []string
	}{
		{"/var/lib/nsbox/rootfs/.tmp-x-1", []string{"/var/lib/nsbox/rootfs/.tmp-x-1/rootfs/dev/null", "/var/lib/nsbox/rootfs/.tmp-x-1/rootfs/sys"}},
		{"/var/lib/nsbox/rootfs/.tmp-x-2", nil},
		{"/srv/with space", []string{"/srv/with space"}},
	}
	for _, tc := range tests {
		got, err := mountsUnder(openFixture(t, "mountinfo.txt"), tc.dir)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("mountsUnder(%s) = %v, %v; want %v", tc.dir, got, err, tc.want)
		}
	}
}

func TestValidName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"default", true}, {"py3.11_datasci-2", true}, {"0", true}, {strings.Repeat("a", 63), true},
		{"", false}, {strings.Repeat("a", 64), false}, {".tmp-x", false}, {"-x", false},
		{"Default", false}, {"a/b", false}, {"..", false}, {"a b", false},
	}
	for _, tc := range tests {
		if err := ValidName(tc.name); (err == nil) != tc.ok {
			t.Errorf("ValidName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestWithSandboxEntry(t *testing.T) {
	old := "root:x:0:0::/root:/bin/sh\nsandbox:x:5:5::/home:/bin/false\nnobody:x:65534:65534::/:/usr/sbin/nologin"
	got := string(withSandboxEntry([]byte(old), sandboxPasswd))
	want := "root:x:0:0::/root:/bin/sh\nnobody:x:65534:65534::/:/usr/sbin/nologin\n" + sandboxPasswd + "\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func FuzzCleanEntryName(f *testing.F) {
	for _, s := range []string{"a/b", "../x", "/etc/passwd", "a/../../b", "./.", "a//b/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		rel, err := cleanEntryName(name)
		if err != nil {
			return
		}
		if strings.HasPrefix(rel, "/") || rel == ".." || strings.HasPrefix(rel, "../") || strings.Contains(rel, "/../") || strings.HasSuffix(rel, "/..") {
			t.Fatalf("cleanEntryName(%q) = %q escapes", name, rel)
		}
	})
}
