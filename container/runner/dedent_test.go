package runner

import (
	"strings"
	"testing"
)

func TestDedent(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"flush", "x = 1\nx", "x = 1\nx"},
		{"empty", "", ""},
		{"blank only", "\n   \n", "\n   \n"},
		{"indented", "    x = 1\n    x", "x = 1\nx"},
		{"template literal", "\n        import os\n        if True:\n            y = 2\n        y\n        ", "\nimport os\nif True:\n    y = 2\ny\n"},
		{"tabs", "\tx = 1\n\tx", "x = 1\nx"},
		// IPython's rule, not textwrap's: the first line's indent, not
		// the common one; a line without it is left alone.
		{"less indented later", "    a = 1\n  b = 2", "a = 1\n  b = 2"},
		{"more indented first", "        a = 1\n    b = 2", "a = 1\n    b = 2"},
		{"CRLF", "  x = 1\r\n  x\r\n", "x = 1\r\nx\r\n"},
		{"blank lines keep their place", "\n\n  1/0", "\n\n1/0"},
		{"a string's lines too", "  s = '''\n  a\n  '''", "s = '''\na\n'''"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Dedent(tc.in); got != tc.want {
				t.Errorf("Dedent(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func FuzzDedent(f *testing.F) {
	for _, s := range []string{"", "x", "  x\n  y", "\n\t a\n\t b\n c", " \r\n  x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Dedent(s)
		if strings.Count(got, "\n") != strings.Count(s, "\n") {
			t.Fatalf("Dedent(%q) = %q: the line count changed", s, got)
		}
		if len(got) > len(s) {
			t.Fatalf("Dedent(%q) = %q: longer", s, got)
		}
		if again := Dedent(got); again != got {
			t.Fatalf("Dedent(%q) = %q, and again %q: not idempotent", s, got, again)
		}
	})
}
