package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// Language is an operator-declared one-shot language ([languages.NAME]):
// a run with `"language": NAME` runs Argv on a rootfs of Rootfs (empty:
// any), its code in a file (Argv's "{file}", named main+Extension under
// /workspace/.nsbox) or, without "{file}", on standard input.
type Language struct {
	Name      string
	Argv      []string
	Rootfs    []string
	Extension string
}

// FileArg in a Language's Argv stands for the program's path.
const FileArg = "{file}"

// programDir is where a declared language's program is written, relative
// to /workspace.
const programDir = ".nsbox"

// Check says what is wrong with l, or nil.
func (l Language) Check() error {
	if err := ValidLanguageName(l.Name); err != nil {
		return err
	}
	if len(l.Argv) == 0 || l.Argv[0] == "" {
		return fmt.Errorf("language %q: argv is empty; give the command, e.g. [\"Rscript\", %q]", l.Name, FileArg)
	}
	if l.Extension != "" && (!strings.HasPrefix(l.Extension, ".") || strings.ContainsAny(l.Extension, "/\x00") || len(l.Extension) > 16) {
		return fmt.Errorf("language %q: extension %q: give a short suffix starting with a dot, like \".R\"", l.Name, l.Extension)
	}
	return nil
}

// ValidLanguageName checks a declared language's name: 1 to 32 of
// [a-z0-9_+-], not a built-in one.
func ValidLanguageName(name string) error {
	switch {
	case name == agentapi.LanguagePython || name == agentapi.LanguageBash || IsNode(name):
		return fmt.Errorf("language %q is built in; declare another name", name)
	case name == "" || len(name) > 32 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789_+-") != "":
		return fmt.Errorf("language name %q: use 1 to 32 of a-z, 0-9, _, + and -", name)
	}
	return nil
}

// Languages lists the languages a run may use on rootfs: the built-in ones
// and those declared for it (or for every rootfs), sorted after them.
func (pol *Rules) Languages(rootfs string) []string {
	out := []string{agentapi.LanguagePython, agentapi.LanguageBash}
	if pol.Builtins != nil {
		out = append(out, pol.Builtins(rootfs)...)
	}
	var declared []string
	for _, l := range pol.languages {
		if len(l.Rootfs) == 0 || slices.Contains(l.Rootfs, rootfs) {
			declared = append(declared, l.Name)
		}
	}
	slices.Sort(declared)
	return append(out, declared...)
}

// declared returns the declared language name on rootfs, or an error
// that lists what the rootfs has.
func (pol *Rules) declared(name, rootfs string) (Language, error) {
	l, ok := pol.languages[name]
	if ok && (len(l.Rootfs) == 0 || slices.Contains(l.Rootfs, rootfs)) {
		return l, nil
	}
	why := "is not a language of this daemon"
	if ok {
		why = fmt.Sprintf("is declared for rootfs %s only", strings.Join(l.Rootfs, ", "))
	}
	return Language{}, errdefs.Field("language", "%q %s; rootfs %q has %s (the operator declares more in [languages.NAME])",
		name, why, rootfs, strings.Join(pol.Languages(rootfs), ", "))
}

// program is a declared language's argv and the file (or stdin) that
// carries code.
func (l Language) program(code string) (argv []string, file *container.File, stdin bool) {
	path := programDir + "/main" + l.Extension
	argv = make([]string, len(l.Argv))
	for i, a := range l.Argv {
		argv[i] = strings.ReplaceAll(a, FileArg, "/workspace/"+path)
		if argv[i] != a {
			file = &container.File{Path: path, Data: []byte(code), Mode: 0o444}
		}
	}
	return argv, file, file == nil
}

// IsNode reports a language that runs on Node.js (javascript, typescript).
func IsNode(lang string) bool {
	return lang == agentapi.LanguageJavaScript || lang == agentapi.LanguageTypeScript
}

// builtin checks that rootfs has a built-in language beyond python and
// bash, and names what it has when it does not.
func (pol *Rules) builtin(name, rootfs string) error {
	if pol.Builtins != nil && slices.Contains(pol.Builtins(rootfs), name) {
		return nil
	}
	return errdefs.Field("language", "%q needs Node.js%s in the rootfs, and rootfs %q has %s; use a rootfs of the datasci profile (nsbox rootfs build --profile datasci)",
		name, map[bool]string{true: " and esbuild", false: ""}[name == agentapi.LanguageTypeScript], rootfs, strings.Join(pol.Languages(rootfs), ", "))
}
