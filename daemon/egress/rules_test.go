package egress

import (
	"errors"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Rule
		err  string // a fragment of the error; "" means accepted
	}{
		{in: "pypi.org", want: Rule{Host: "pypi.org"}},
		{in: " PyPI.org. ", want: Rule{Host: "pypi.org"}},
		{in: "*.pythonhosted.org", want: Rule{Host: "*.pythonhosted.org"}},
		{in: "api.github.com:443", want: Rule{Host: "api.github.com", Port: 443}},
		{in: "10.1.2.3:8080", want: Rule{Host: "10.1.2.3", Port: 8080}},
		{in: "[::1]:80", want: Rule{Host: "::1", Port: 80}},
		{in: "[::1]", want: Rule{Host: "::1"}},
		{in: "2001:db8::1", want: Rule{Host: "2001:db8::1"}},
		{in: "[::ffff:10.0.0.1]:80", want: Rule{Host: "10.0.0.1", Port: 80}},
		{in: "under_score.example.org", want: Rule{Host: "under_score.example.org"}},
		{in: "", err: "empty"},
		{in: "*", err: "whole internet"},
		{in: "*.com", err: "single label"},
		{in: "*.test", err: "single label"},
		{in: "a.*.org", err: "leftmost"},
		{in: "*a.org", err: "leftmost"},
		{in: "pypi.org:0", err: "1-65535"},
		{in: "pypi.org:65536", err: "1-65535"},
		{in: "pypi.org:", err: "1-65535"},
		{in: "pypi.org:http", err: "1-65535"},
		{in: "https://pypi.org", err: "not a URL"},
		{in: "pypi.org/simple", err: "not a URL"},
		{in: "a..org", err: "doubled dot"},
		{in: "-a.org", err: "hyphen"},
		{in: "a b.org", err: "letters, digits"},
		{in: strings.Repeat("a", 64) + ".org", err: "1-63"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseRule(tc.in)
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrInvalidRule) || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), `"`+tc.in+`"`) {
					t.Fatalf("ParseRule(%q) = %v, %v; want an error naming the entry and %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseRule(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
			if back, err := ParseRule(got.String()); err != nil || back != got {
				t.Errorf("ParseRule(%q.String() = %q) = %v, %v", tc.in, got.String(), back, err)
			}
		})
	}
}

func TestRuleMatches(t *testing.T) {
	for _, tc := range []struct {
		rule, host string
		port       int
		want       bool
	}{
		{"pypi.org", "pypi.org", 443, true},
		{"pypi.org", "PYPI.ORG.", 80, true},
		{"pypi.org", "pypi.org", 8080, false},
		{"pypi.org", "x.pypi.org", 443, false},
		{"pypi.org:8443", "pypi.org", 8443, true},
		{"pypi.org:8443", "pypi.org", 443, false},
		{"*.x.org", "a.x.org", 443, true},
		{"*.x.org", "x.org", 443, false},
		{"*.x.org", "a.b.x.org", 443, false},
		{"*.x.org", "ax.org", 443, false},
		{"10.1.2.3:8080", "10.1.2.3", 8080, true},
		{"10.1.2.3:8080", "::ffff:10.1.2.3", 8080, true},
		{"10.1.2.3:8080", "10.1.2.4", 8080, false},
		{"[::1]:80", "::1", 80, true},
		{"[::1]:80", "[0:0::1]", 80, true},
	} {
		t.Run(tc.rule+" "+tc.host, func(t *testing.T) {
			if got := mustRule(t, tc.rule).Matches(tc.host, tc.port); got != tc.want {
				t.Errorf("%s.Matches(%q, %d) = %v", tc.rule, tc.host, tc.port, got)
			}
		})
	}
}

func TestRuleWithin(t *testing.T) {
	operator := mustRules(t, "pypi.org", "*.pythonhosted.org", "api.github.com:443", "10.1.2.3:8080")
	for _, tc := range []struct {
		rule string
		want bool
	}{
		{"pypi.org", true},
		{"pypi.org:443", true},
		{"pypi.org:80", true},
		{"pypi.org:8080", false},
		{"files.pythonhosted.org", true},
		{"a.files.pythonhosted.org", false},
		{"pythonhosted.org", false},
		{"*.pythonhosted.org", true},
		{"*.pythonhosted.org:443", true},
		{"*.files.pythonhosted.org", false},
		{"api.github.com:443", true},
		{"api.github.com", false}, // port 0 means 80 too
		{"api.github.com:80", false},
		{"10.1.2.3:8080", true},
		{"10.1.2.3:80", false},
		{"example.org", false},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			if got := mustRule(t, tc.rule).Within(operator); got != tc.want {
				t.Errorf("%s.Within(operator) = %v", tc.rule, got)
			}
		})
	}
}

func mustRule(t testing.TB, s string) Rule {
	t.Helper()
	r, err := ParseRule(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustRules(t testing.TB, ss ...string) []Rule {
	t.Helper()
	var rs []Rule
	for _, s := range ss {
		rs = append(rs, mustRule(t, s))
	}
	return rs
}

// FuzzParseRule: whatever an operator or caller writes, an accepted rule
// reads back as itself.
func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"pypi.org", "*.pythonhosted.org", "api.github.com:443", "[::1]:80", "a.*.org", "*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			return
		}
		if back, err := ParseRule(r.String()); err != nil || back != r {
			t.Errorf("ParseRule(%q) = %v; its String %q reads back as %v, %v", s, r, r.String(), back, err)
		}
	})
}

func TestRuleOverlaps(t *testing.T) {
	for _, c := range []struct {
		r, o string
		want bool
	}{
		{"pypi.org", "pypi.org", true},
		{"pypi.org:443", "pypi.org", true},
		{"pypi.org:8080", "pypi.org", false},
		{"*.pythonhosted.org", "files.pythonhosted.org", true},
		{"files.pythonhosted.org", "*.pythonhosted.org", true},
		{"*.pythonhosted.org", "*.pythonhosted.org", true},
		{"*.a.pythonhosted.org", "*.pythonhosted.org", false},
		{"pythonhosted.org", "*.pythonhosted.org", false},
		{"example.org", "pypi.org", false},
	} {
		r, o := mustRule(t, c.r), mustRule(t, c.o)
		if got := r.overlaps(o); got != c.want {
			t.Errorf("%s overlaps %s = %v, want %v", c.r, c.o, got, c.want)
		}
	}
}
