package lang

import (
	"fmt"
	"strings"

	"github.com/nsbox/nsbox/container"
)

// Declared is an operator-declared one-shot language ([languages.NAME]):
// a run with `"language": NAME` runs Argv on a rootfs of Rootfs (empty:
// any), its code in a file (Argv's "{file}", named main+Extension under
// /workspace/.nsbox) or, without "{file}", on standard input. It is one
// more row of the registry, with no runner.
type Declared struct {
	Name      string
	Argv      []string
	Rootfs    []string
	Extension string
}

// FileArg in a Declared's Argv stands for the program's path.
const FileArg = "{file}"

// programDir is where a declared language's program is written, relative
// to /workspace.
const programDir = ".nsbox"

// Check says what is wrong with l, or nil.
func (l Declared) Check() error {
	if err := ValidName(l.Name); err != nil {
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

// ValidName checks a declared language's name: 1 to 32 of [a-z0-9_+-],
// not a built-in one's name or alias.
func ValidName(name string) error {
	if _, ok := Builtin(name); ok {
		return fmt.Errorf("language %q is built in; declare another name", name)
	}
	if name == "" || len(name) > 32 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789_+-") != "" {
		return fmt.Errorf("language name %q: use 1 to 32 of a-z, 0-9, _, + and -", name)
	}
	return nil
}

func (l Declared) hasFileArg() bool { return strings.Contains(strings.Join(l.Argv, " "), FileArg) }

// descriptor is l's row of the registry.
func (l Declared) descriptor() *Descriptor {
	return &Descriptor{Name: l.Name, Title: l.Name, Description: "A program run with " + strings.Join(l.Argv, " ") + " in a fresh sandbox.",
		declared: &l, oneShot: func(code, _ string) Program { return l.program(code) }}
}

// program is l's argv and the file (or stdin) that carries code.
func (l Declared) program(code string) Program {
	path := programDir + "/main" + l.Extension
	p := Program{Argv: make([]string, len(l.Argv))}
	for i, a := range l.Argv {
		p.Argv[i] = strings.ReplaceAll(a, FileArg, "/workspace/"+path)
		if p.Argv[i] != a {
			p.File = &container.File{Path: path, Data: []byte(code), Mode: 0o444}
		}
	}
	p.Stdin = p.File == nil
	return p
}
