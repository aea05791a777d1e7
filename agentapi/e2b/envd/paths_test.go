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

// TestSandboxTarget: a path is the workspace's (the host's fast path)
// only under /home/user or /workspace once ".." is resolved; any other is
// the sandbox's, absolute and clean, for the agent to resolve inside it.
func TestSandboxTarget(t *testing.T) {
	for _, tc := range []struct {
		in, abs, rel string
		ws           bool
	}{
		{"a/b", "/home/user/a/b", "a/b", true},
		{"/workspace", "/workspace", "", true},
		{"/tmp/x", "/tmp/x", "", false},
		{"/tmp/../etc/passwd", "/etc/passwd", "", false},
		{"/home/user/../../tmp/x", "/tmp/x", "", false},
		{"../../../../etc", "/etc", "", false},
		{"/home/username", "/home/username", "", false},
		{"/proc/1/root/etc", "/proc/1/root/etc", "", false},
	} {
		got, err := sandboxTarget("path", tc.in)
		if err != nil || got != (target{abs: tc.abs, rel: tc.rel, ws: tc.ws}) {
			t.Errorf("sandboxTarget(%q) = %+v, %v; want %+v", tc.in, got, err, tc)
		}
	}
}
