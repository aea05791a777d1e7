// Package interp is the language side of E2B's code interpreter: the
// names its SDKs send (js, ts), the contexts a sandbox lists from the
// start, where a request's cell runs (Resolve), and its error item. Python
// runs in the session's own interpreter (contexts are its namespaces);
// JavaScript, TypeScript and bash run in the core's guest interpreters
// (daemon.GuestExec), one per context, as E2B runs a kernel per context.
package interp

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/lang"
)

// Context is one code interpreter context, as E2B lists it.
type Context struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

// DefaultID is the id the default Python context is listed under; code
// sent with neither a context nor a language runs there (the session's
// __main__).
const DefaultID = "default"

// Normalize is a language as E2B's server names it: trimmed, lower-case,
// "" python, js javascript, ts typescript.
func Normalize(name string) string {
	switch n := strings.ToLower(strings.TrimSpace(name)); n {
	case "":
		return lang.Default().Name
	case "js":
		return agentapi.LanguageJavaScript
	case "ts":
		return agentapi.LanguageTypeScript
	default:
		return n
	}
}

// Languages are those the code interpreter runs: Python, then those of
// the core's guests.
func Languages() []string { return append([]string{lang.Default().Name}, lang.Guests()...) }

// Check refuses a language the code interpreter does not run, naming
// those it does (R and Java run where the sandbox's rootfs has them: the
// core refuses them elsewhere, saying which profile does).
func Check(language string) error {
	if slices.Contains(Languages(), language) {
		return nil
	}
	return errdefs.Field("language", "%q: nsbox's code interpreter runs %s", language, strings.Join(Languages(), ", "))
}

// Guest reports a language that runs in a guest interpreter.
func Guest(language string) bool { return language != lang.Default().Name }

// defaultOf is the id of a guest language's default context.
func defaultOf(language string) string { return "default-" + language }

// Defaults are the default contexts a sandbox lists, in home: Python's and
// JavaScript's always (E2B's server starts both), another language's once
// a cell ran there (started).
func Defaults(home string, started func(id string) bool) []Context {
	out := []Context{{ID: DefaultID, Language: lang.Default().Name, Cwd: home}}
	for _, l := range lang.Guests() {
		if id := defaultOf(l); l == agentapi.LanguageJavaScript || started(id) {
			out = append(out, Context{ID: id, Language: l, Cwd: home})
		}
	}
	return out
}

// Resolve is the context an /execute runs in: its language's default one
// (in home), or the context named (lookup finds those created), or
// Python's. Naming both is refused, as E2B's server does.
func Resolve(contextID, language, home string, lookup func(id string) (Context, bool)) (Context, error) {
	switch {
	case contextID != "" && language != "":
		return Context{}, errdefs.Field("language", "only one of context_id or language can be provided")
	case language != "":
		l := Normalize(language)
		if err := Check(l); err != nil {
			return Context{}, err
		}
		if !Guest(l) {
			return Context{ID: DefaultID, Language: l, Cwd: home}, nil
		}
		return Context{ID: defaultOf(l), Language: l, Cwd: home}, nil
	case contextID == "" || contextID == DefaultID:
		return Context{ID: DefaultID, Language: lang.Default().Name, Cwd: home}, nil
	}
	for _, c := range Defaults(home, func(string) bool { return true }) {
		if c.ID == contextID {
			return c, nil
		}
	}
	if c, ok := lookup(contextID); ok {
		return c, nil
	}
	return Context{}, errdefs.In(errdefs.ErrNotFound, fmt.Errorf("context %q not found", contextID))
}

// Error is a cell's error item, if it has one: its exception, a bash
// cell's exit status (as Jupyter's bash kernel says it: no name, the
// status as the value), or the verdict of a cell a limit ended.
func Error(res *agentapi.RunResult) (name, value, traceback string, ok bool) {
	switch {
	case res.Exception != nil:
		return res.Exception.Name, res.Exception.Value, res.Exception.Traceback, true
	case res.Status == agentapi.StatusException && res.ExitCode != 0:
		return "", strconv.Itoa(res.ExitCode), "", true
	case res.Status != agentapi.StatusOK:
		return res.Status, res.Error, "", true
	}
	return "", "", "", false
}

// PlainText is a result's text as E2B's code interpreter sends it: the
// text/plain form (a Python value's repr) less one pair of quotes that
// begin and end it, as its server's Result model strips them from every
// result (template/server/api/models/result.py), so a str 'bar' is bar
// while ['bar'] and 1 keep their repr. A quote alone is "", as there.
// /v1's value stays the repr, which tells the str "1" from the int 1.
func PlainText(repr string) string {
	if n := len(repr); n > 0 && (repr[0] == '\'' || repr[0] == '"') && repr[n-1] == repr[0] {
		return repr[1:max(n-1, 1)]
	}
	return repr
}
