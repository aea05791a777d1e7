package e2b

import "testing"

// TestPlainText: a result's text is E2B's, whose server strips one pair of
// enclosing quotes from every text/plain (a str's repr), and only those.
func TestPlainText(t *testing.T) {
	for _, tc := range []struct{ repr, want string }{
		{"'bar'", "bar"},
		{`"it's"`, "it's"},
		{`'a\nb'`, `a\nb`},
		{"''", ""},
		{"'", ""},
		{"1", "1"},
		{"['bar']", "['bar']"},
		{`'a" `, `'a" `},
		{`'a"`, `'a"`},
		{"(1, 'x')", "(1, 'x')"},
		{"", ""},
	} {
		if got := plainText(tc.repr); got != tc.want {
			t.Errorf("plainText(%q) = %q, want %q", tc.repr, got, tc.want)
		}
	}
}
