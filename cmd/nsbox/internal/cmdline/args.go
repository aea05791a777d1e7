package cmdline

import (
	"strings"
	"unicode"

	"github.com/urfave/cli/v2"
)

// ReorderArgs moves the flags of the command being run in front of its
// positional arguments, so that `nsbox session rm ID --socket S` reads as
// `nsbox session rm --socket S ID`: urfave/cli v2 stops parsing flags at
// the first positional argument. Everything after "--" stays where it is,
// and so does everything from the first positional argument of a command
// that runs a command line (exec: `nsbox exec python3 -v` passes -v to
// python3). A token that starts with "-" counts as a flag, known or not, so
// that a mistyped flag is reported rather than taken as an argument; "-"
// alone (stdin), a negative number or Python code is an argument.
func ReorderArgs(app *cli.App, args []string) []string {
	if len(args) < 2 || args[len(args)-1] == "--generate-bash-completion" {
		return args // urfave/cli looks for the completion flag last
	}
	out := []string{args[0]}
	rest := args[1:]
	flags := app.Flags
	subs := app.Commands
	var cmd *cli.Command
	var path []string
	// Walk down the command path: flags of each level stay on it.
	for len(subs) > 0 {
		i := 0
		for i < len(rest) && isFlagToken(rest[i]) {
			i += flagTokens(flags, rest[i:])
		}
		if i >= len(rest) {
			return append(out, rest...)
		}
		next := findCommand(subs, rest[i])
		if next == nil {
			return append(out, rest...) // unknown command: reported as such
		}
		out = append(out, rest[:i+1]...)
		rest = rest[i+1:]
		cmd, flags, subs = next, next.Flags, next.Subcommands
		path = append(path, next.Name)
	}
	cmdLine := strings.Join(path, " ") == "exec"
	if cmd == nil || cmd.SkipFlagParsing {
		return append(out, rest...)
	}
	var pos []string
	for i := 0; i < len(rest); {
		tok := rest[i]
		switch {
		case tok == "--":
			pos = append(pos, rest[i:]...)
			i = len(rest)
		case len(pos) > 0 && cmdLine:
			pos = append(pos, rest[i:]...)
			i = len(rest)
		case isFlagToken(tok):
			n := flagTokens(flags, rest[i:])
			out = append(out, rest[i:i+n]...)
			i += n
		default:
			pos = append(pos, tok)
			i++
		}
	}
	return append(out, pos...)
}

// isFlagToken reports whether s is shaped like a flag: -x, --name or
// --name=value. "-", "-1" and "-x + 1" (Python code) are arguments.
func isFlagToken(s string) bool {
	name, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(s, "-"), "-"), "=")
	if len(s) < 2 || s[0] != '-' || name == "" || !unicode.IsLetter(rune(name[0])) {
		return false
	}
	return strings.IndexFunc(name, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' }) < 0
}

// flagTokens is how many tokens the flag at args[0] takes: 2 when it is a
// flag of flags that takes a value given as the next token, else 1.
func flagTokens(flags []cli.Flag, args []string) int {
	tok := args[0]
	if tok == "--" || strings.Contains(tok, "=") || len(args) < 2 {
		return 1
	}
	name := strings.TrimLeft(tok, "-")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n != name {
				continue
			}
			if tv, ok := f.(cli.DocGenerationFlag); ok && tv.TakesValue() {
				return 2
			}
			return 1
		}
	}
	return 1
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}
