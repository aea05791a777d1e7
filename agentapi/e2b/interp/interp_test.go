package interp

import (
	"errors"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

func TestResolve(t *testing.T) {
	created := map[string]Context{"c1": {ID: "c1", Language: "bash", Cwd: "/tmp"}}
	lookup := func(id string) (Context, bool) { c, ok := created[id]; return c, ok }
	for _, tc := range []struct {
		ctx, lang string
		want      Context
		class     error
	}{
		{want: Context{ID: DefaultID, Language: "python", Cwd: "/h"}},
		{lang: "Python", want: Context{ID: DefaultID, Language: "python", Cwd: "/h"}},
		{lang: " JS ", want: Context{ID: "default-javascript", Language: "javascript", Cwd: "/h"}},
		{lang: "ts", want: Context{ID: "default-typescript", Language: "typescript", Cwd: "/h"}},
		{lang: "bash", want: Context{ID: "default-bash", Language: "bash", Cwd: "/h"}},
		{ctx: "default-bash", want: Context{ID: "default-bash", Language: "bash", Cwd: "/h"}},
		{ctx: "c1", want: created["c1"]},
		{ctx: "c1", lang: "python", class: errdefs.ErrInvalidArgument},
		{lang: "R", want: Context{ID: "default-r", Language: "r", Cwd: "/h"}},
		{lang: "java", want: Context{ID: "default-java", Language: "java", Cwd: "/h"}},
		{lang: "cobol", class: errdefs.ErrInvalidArgument},
		{ctx: "nope", class: errdefs.ErrNotFound},
	} {
		got, err := Resolve(tc.ctx, tc.lang, "/h", lookup)
		if tc.class != nil {
			if !errors.Is(err, tc.class) {
				t.Errorf("Resolve(%q, %q): %v, want %v", tc.ctx, tc.lang, err, tc.class)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Resolve(%q, %q) = %+v, %v; want %+v", tc.ctx, tc.lang, got, err, tc.want)
		}
	}
	if _, err := Resolve("", "cobol", "/h", lookup); !strings.Contains(err.Error(), "python, bash, javascript, typescript, r, java") {
		t.Errorf("the refusal of cobol names no languages: %v", err)
	}
}

func TestError(t *testing.T) {
	for _, tc := range []struct {
		res         agentapi.RunResult
		name, value string
		ok          bool
	}{
		{res: agentapi.RunResult{Status: agentapi.StatusOK}},
		{res: agentapi.RunResult{Status: agentapi.StatusException, Exception: &agentapi.Exception{Name: "TypeError", Value: "x"}}, name: "TypeError", value: "x", ok: true},
		{res: agentapi.RunResult{Status: agentapi.StatusException, ExitCode: 2}, value: "2", ok: true},
		{res: agentapi.RunResult{Status: agentapi.StatusTimeout, Error: "late"}, name: "timeout", value: "late", ok: true},
	} {
		name, value, _, ok := Error(&tc.res)
		if name != tc.name || value != tc.value || ok != tc.ok {
			t.Errorf("Error(%+v) = %q %q %v", tc.res, name, value, ok)
		}
	}
}

// TestCwds: a sandbox without a context of its own cwd runs nothing; with
// one, a switch records where the context left the interpreter and goes
// where the next one left it.
func TestCwds(t *testing.T) {
	var w Cwds
	var ran []string
	where := "/h"
	run := func(code string) (string, error) {
		ran = append(ran, code)
		was := where
		where = code[strings.Index(code, "chdir(")+7 : strings.LastIndex(code, `")`)]
		return was, nil
	}
	enter := func(c Context) {
		t.Helper()
		release, err := w.Enter("sb", c, "/h", run)
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	def := Context{ID: DefaultID, Cwd: "/h"}
	enter(def)
	if len(ran) != 0 {
		t.Fatalf("a sandbox with only home contexts ran %q", ran)
	}
	tmp := Context{ID: "t", Cwd: "/tmp"}
	enter(tmp)
	if where != "/tmp" {
		t.Fatalf("in t: %s", where)
	}
	enter(tmp)
	if len(ran) != 1 {
		t.Fatalf("a second cell of the same context switched: %q", ran)
	}
	where = "/usr" // t's cell moved itself
	enter(def)
	if where != "/h" {
		t.Fatalf("back in the default: %s", where)
	}
	enter(tmp)
	if where != "/usr" {
		t.Fatalf("t again: %s, want where it left it", where)
	}
	w.Forget("sb")
	if w.m["sb"] != nil {
		t.Fatal("Forget kept the sandbox")
	}
}

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
		if got := PlainText(tc.repr); got != tc.want {
			t.Errorf("PlainText(%q) = %q, want %q", tc.repr, got, tc.want)
		}
	}
}
