package envd

import (
	"strings"
	"testing"
)

func TestWorkspacePath(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"/home/user", "", true},
		{"/home/user/", "", true},
		{"/home/user/a/b.txt", "a/b.txt", true},
		{"/workspace/a", "a", true},
		{"a/b", "a/b", true},
		{"./a", "a", true},
		{"/home/user/../user/x", "x", true},
		{"/home/user/../../etc/passwd", "", false},
		{"../etc/passwd", "", false},
		{"/etc/passwd", "", false},
		{"/home/username/x", "", false},
		{"/tmp/x", "", false},
		{"", "", false},
		{"a\x00b", "", false},
	} {
		got, err := workspacePath("path", tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("workspacePath(%q) = %q, %v; want %q, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func FuzzWorkspacePath(f *testing.F) {
	for _, s := range []string{"/home/user/a", "../x", "/home/user/../../x", "a/./b//c", "/workspace/.."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		rel, err := workspacePath("path", p)
		if err != nil {
			return
		}
		if strings.HasPrefix(rel, "/") || rel == ".." || strings.HasPrefix(rel, "../") || strings.Contains(rel, "/../") || strings.HasSuffix(rel, "/..") {
			t.Fatalf("workspacePath(%q) = %q escapes the workspace", p, rel)
		}
	})
}
