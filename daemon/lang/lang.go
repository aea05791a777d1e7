// Package lang is the daemon's registry of run languages: one Descriptor
// per language (its name and aliases, the runner kind that runs its cells
// or none, the transform applied to them, its one-shot program, what the
// rootfs must contain, and what it can do), the built-in rows and the
// operator's [languages.NAME] rows. Validation, spec building, the choice
// of runner, pools, sessions, the E2B interpreter and /v1/info ask it;
// nothing else names a language. The runner kinds themselves, and what
// each can do, are the engine's (container/runner).
package lang

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/runner"
	"github.com/nsbox/nsbox/container/runner/guest"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/rootfs"
)

// Descriptor is one language.
type Descriptor struct {
	// Name is the language's name on the wire (RunRequest.Language).
	Name string
	// Aliases are other names for it (python3).
	Aliases []string
	// Title is its name for people, and Description what a call of it
	// runs and returns, in a sentence (GET /v1/info; nsbox mcp's tool docs).
	Title, Description string
	// Runner is the runner kind that runs its code in runs and sessions,
	// "" for none: its runs are one-shot programs only.
	Runner runner.Language
	// Transform is what the runner does to each cell first
	// (runner.StripTypes for TypeScript).
	Transform runner.Transform
	// Needs are files the rootfs must have (relative to its root; a
	// symlink counts, unfollowed), and needsWhat names them in errors.
	Needs     []string
	needsWhat string
	// codeInArgv: the code is an argument of the one-shot command (bash
	// -c), held to the kernel's limit for one argument.
	codeInArgv bool
	// oneShot is the program of a run that does not go through the runner
	// (no runner kind, no Starter, or a custom seccomp filter); nil: the
	// language needs its runner.
	oneShot func(code, dir string) Program
	// guest is the guest interpreter that runs its cells beside another
	// language's session (container/runner/guest), "" for none.
	guest guest.Kind
	// profile is the rootfs profile that has what it Needs.
	profile string
	// pool names the built-in pool of its runners on the default rootfs
	// ([pool] node_size), if it has one.
	pool string
	// declared is the operator's declaration, for a declared language.
	declared *Declared
}

// Program is a one-shot run's command: Argv, with the code in File (when
// not nil, written into /workspace) or on standard input (Stdin).
type Program struct {
	Argv  []string
	File  *container.File
	Stdin bool
}

// builtin are the built-in languages, in the order /v1/info lists them;
// a rootfs runs those whose Needs it has.
var builtin = []*Descriptor{
	{
		Name: agentapi.LanguagePython, Aliases: []string{"python3"}, Runner: runner.Python,
		Title: "Python",
		Description: "Python 3 code, like a notebook cell: the repr of the last expression is returned, an exception comes back with its traceback, " +
			"and every matplotlib figure (open at the end or passed to plt.show()) as a PNG image.",
		// Dedented as its runner does: a cell behaves alike on every path.
		oneShot: func(code, _ string) Program { return Program{Argv: []string{"python3", "-c", runner.Dedent(code)}} },
	},
	{
		Name: agentapi.LanguageBash, codeInArgv: true, guest: guest.Bash,
		Title: "Bash", Description: "A shell command line, run with bash -c (sh where the rootfs has no bash); its exit code is returned.",
		oneShot: func(code, dir string) Program {
			sh := "/bin/sh"
			if hasFile(dir, "usr/bin/bash") || hasFile(dir, "bin/bash") {
				sh = "bash"
			}
			return Program{Argv: []string{sh, "-c", code}}
		},
	},
	{
		Name: agentapi.LanguageJavaScript, Runner: runner.JavaScript, guest: guest.JavaScript,
		Needs: []string{"usr/bin/node"}, needsWhat: "Node.js", profile: "datasci", pool: "node",
		Title: "JavaScript",
		Description: "JavaScript on Node.js, like a Node REPL cell: the last expression's value is returned as the Node REPL shows it, " +
			"an exception with its stack (<cell N>:LINE:COL); top-level await works, and require() or await import() load Node's " +
			"built-in modules (fs, path, crypto, child_process, ...); no npm packages are installed.",
		oneShot: func(code, _ string) Program { return Program{Argv: []string{"node", "-e", code}} },
	},
	{
		// No one-shot program: node cannot strip the types.
		Name: agentapi.LanguageTypeScript, Runner: runner.JavaScript, Transform: runner.StripTypes, guest: guest.JavaScript,
		Needs: []string{"usr/bin/node", "usr/bin/esbuild"}, needsWhat: "Node.js and esbuild", profile: "datasci",
		Title: "TypeScript", Description: "TypeScript on Node.js: its types are stripped (not checked) with esbuild, then it runs as JavaScript.",
	},
	{
		Name: agentapi.LanguageR, guest: guest.R, codeInArgv: true,
		Needs: []string{"usr/bin/Rscript"}, needsWhat: "R (Rscript)", profile: "polyglot",
		Title: "R", Description: "R code, run with Rscript; beside a session's interpreter, in one R session whose variables stay, the last visible value printed as R's console prints it.",
		oneShot: func(code, _ string) Program { return Program{Argv: []string{"Rscript", "--vanilla", "-e", code}} },
	},
	{
		// No one-shot program: a JShell script prints what its feedback
		// mode says, not the program's output alone.
		Name: agentapi.LanguageJava, guest: guest.Java,
		Needs: []string{"usr/bin/jshell"}, needsWhat: "Java (OpenJDK's jshell)", profile: "polyglot",
		Title: "Java", Description: "Java snippets in JShell, beside a session's interpreter (E2B's code interpreter): declarations stay, the last expression's value is returned, and the environment is given as system properties (System.getProperty).",
	},
}

// Builtin returns the built-in language name or alias names.
func Builtin(name string) (*Descriptor, bool) {
	for _, d := range builtin {
		if d.Name == name || slices.Contains(d.Aliases, name) {
			return d, true
		}
	}
	return nil, false
}

// Default is the language of a session (and of E2B's interpreter) that
// names none.
func Default() *Descriptor { return builtin[0] }

// OfRunner is the language a runner kind runs without a transform: what a
// pool of such runners, or a session of one, is called.
func OfRunner(k runner.Language) *Descriptor {
	k = k.Or()
	for _, d := range builtin {
		if d.Runner == k && d.Transform == "" {
			return d
		}
	}
	return Default()
}

// Pooled returns the language a [pools.NAME] language names: one whose
// runners a pool keeps (a runner kind's own language, no transform).
func Pooled(name string) (*Descriptor, bool) {
	d, ok := Builtin(name)
	if !ok || d.Runner == "" || d.Transform != "" {
		return nil, false
	}
	return d, true
}

// BuiltinPool returns the language whose runners the built-in pool name
// keeps (the "node" pool: javascript's), or nil.
func BuiltinPool(name string) *Descriptor {
	for _, d := range builtin {
		if d.pool != "" && d.pool == name {
			return d
		}
	}
	return nil
}

// PooledNames lists the languages Pooled takes.
func PooledNames() []string {
	var out []string
	for _, d := range builtin {
		if d.Runner != "" && d.Transform == "" {
			out = append(out, d.Name)
		}
	}
	return out
}

// OnRootfs reports whether the rootfs at dir has what the language needs:
// Python a tree that is not argv-only (rootfs.ArgvOnly: its python3 runs
// the runner), the others their Needs.
func (d *Descriptor) OnRootfs(dir string) bool {
	if d.argvOnly(dir) {
		return false
	}
	for _, f := range d.Needs {
		if !hasFile(dir, f) {
			return false
		}
	}
	return true
}

// argvOnly reports a Python language on a rootfs whose meta.json says it
// is argv-only (no python3 3.9 or newer in its PATH).
func (d *Descriptor) argvOnly(dir string) bool {
	return d.Runner == runner.Python && rootfs.ArgvOnly(dir)
}

// argvOnlyError refuses the language name on the argv-only rootfs
// rootfsName, which runs has.
func argvOnlyError(name, rootfsName string, has []string) error {
	return errdefs.Field("language", "%q needs python3 %s or newer in the rootfs, and rootfs %q is argv-only (nsbox rootfs list says why; it runs %s): "+
		"run a command there with argv (a run's \"argv\", nsbox exec --rootfs %s -- CMD), or use a rootfs with python3 %s or newer",
		name, rootfs.MinPython, rootfsName, strings.Join(has, ", "), rootfsName, rootfs.MinPython)
}

// Sessions reports a language sessions run: one with a runner kind.
func (d *Descriptor) Sessions() bool { return d.Runner != "" }

// Carriable reports a language whose sessions fork and park.
func (d *Descriptor) Carriable() bool { return d.Runner != "" && d.Runner.Snapshots() }

// AllowedImports reports a language that takes allowed_imports.
func (d *Descriptor) AllowedImports() bool { return d.Runner != "" && d.Runner.AllowList() }

// Zygote reports a language whose runs a zygote forks (and whose code's
// imports pick the zygote: Spec.Imports).
func (d *Descriptor) Zygote() bool { return d.Runner != "" && d.Runner.Forks() }

// Processes reports a language whose sessions may run processes beside
// the interpreter (the process agent: E2B sandboxes).
func (d *Descriptor) Processes() bool { return d.Runner != "" && d.Runner.Agent() }

// Contexts reports a language E2B's code interpreter runs in contexts.
func (d *Descriptor) Contexts() bool { return d.Runner != "" && d.Runner.Contexts() }

// GuestOf returns the language name names and its guest kind, or a field
// error on language that lists those a guest runs.
func GuestOf(name string) (*Descriptor, guest.Kind, error) {
	if d, ok := Builtin(name); ok && d.guest != "" {
		return d, d.guest, nil
	}
	return nil, "", errdefs.Field("language", "%q: beside a session's interpreter nsbox runs %s", name, strings.Join(Guests(), ", "))
}

// Guests lists the built-in languages that have a guest interpreter.
func Guests() []string {
	var out []string
	for _, d := range builtin {
		if d.guest != "" {
			out = append(out, d.Name)
		}
	}
	return out
}

// CodeInArgv reports a language whose one-shot code is a command-line
// argument (bash -c), so the kernel's limits for arguments hold it.
func (d *Descriptor) CodeInArgv() bool { return d.codeInArgv }

// HasOneShot reports a language that runs without its runner.
func (d *Descriptor) HasOneShot() bool { return d.oneShot != nil }

// OneShot is the program that runs code on the rootfs at dir without a
// runner; ok is false for a language that needs its runner.
func (d *Descriptor) OneShot(code, dir string) (p Program, ok bool) {
	if d.oneShot == nil {
		return Program{}, false
	}
	return d.oneShot(code, dir), true
}

// StdinIsProgram reports a declared language that reads its program from
// standard input, which a run's stdin would then replace.
func (d *Descriptor) StdinIsProgram() bool { return d.declared != nil && !d.declared.hasFileArg() }

// hasFile reports whether rel exists in the tree at dir (a symlink counts;
// it is not followed on the host).
func hasFile(dir, rel string) bool {
	if dir == "" {
		return false
	}
	_, err := os.Lstat(filepath.Join(dir, rel))
	return err == nil
}
