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
