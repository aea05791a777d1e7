package workspace

import (
	"path"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidPath(t *testing.T) {
	for _, tc := range []struct {
		path string
		want string // "" for valid; else a part of the message
	}{
		{"a", ""},
		{"a/b.txt", ""},
		{"...", ""},
		{"a/..b", ""},
		{"", "empty path"},
		{"a\x00b", "NUL"},
		{"a\xffb", "UTF-8"},
		{strings.Repeat("x/", 2049), "at most 4096"},
		{"/etc/passwd", "absolute"},
		{"..", "escapes"},
		{"a/../b", "escapes"},
		{strings.Repeat("x", 256), "at most 255"},
		{".", "clean form"},
		{"./a", `write it as "a"`},
		{"a//b", `write it as "a/b"`},
		{"a/", `write it as "a"`},
		{"a/./b", `write it as "a/b"`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			err := ValidPath(tc.path)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("ValidPath(%q) = %v, want nil", tc.path, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("ValidPath(%q) = %v, want an error naming %q", tc.path, err, tc.want)
			}
		})
	}
}

func FuzzValidPath(f *testing.F) {
	for _, s := range []string{"a", "a/b.txt", "../x", "/etc", "a/../b", "./a", "a//b", "a/", ".", "", "a\x00b", "..", "...", "a/..b", "\xff", strings.Repeat("x", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if ValidPath(p) != nil {
			return
		}
		if !filepath.IsLocal(p) || path.Clean(p) != p || strings.ContainsRune(p, 0) || !utf8.ValidString(p) || len(p) > MaxPathBytes {
			t.Fatalf("ValidPath accepted %q", p)
		}
		for el := range strings.SplitSeq(p, "/") {
			if el == ".." || el == "." || el == "" || len(el) > MaxNameBytes {
				t.Fatalf("ValidPath accepted %q with element %q", p, el)
			}
		}
	})
}
