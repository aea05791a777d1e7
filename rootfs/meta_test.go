package rootfs

import "testing"

func TestMetaVersion(t *testing.T) {
	// Versions as bookworm's datasci rootfs lists them.
	m := Meta{Packages: []Package{
		{"python3", "3.11.2-1+b1"},
		{"nodejs", "18.20.4+dfsg-1~deb12u2"},
		{"esbuild", "0.17.0-1+b2"},
		{"node-acorn", "8.8.1+ds+~cs25.17.7-2"},
		{"adduser", "3.134"},
		{"libgcc-s1", "12.2.0-14"},
		{"tzdata", "2024a-0+deb12u1"},
		{"bsdutils", "1:2.38.1-5+deb12u1"},
	}}
	tests := []struct{ pkg, want string }{
		{"python3", "3.11.2"},
		{"nodejs", "18.20.4"},
		{"esbuild", "0.17.0"},
		{"node-acorn", "8.8.1"},
		{"adduser", "3.134"}, // a native package has no revision
		{"tzdata", "2024a"},
		{"bsdutils", "2.38.1"}, // epoch dropped
		{"ruby", ""},           // not installed
	}
	for _, tc := range tests {
		if got := m.Version(tc.pkg); got != tc.want {
			t.Errorf("Version(%q) = %q, want %q", tc.pkg, got, tc.want)
		}
	}
}
