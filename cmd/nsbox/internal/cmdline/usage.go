package cmdline

import (
	"fmt"
	"regexp"

	"github.com/urfave/cli/v2"
	"github.com/xrash/smetrics"
)

// ExitUsage is the exit status of a command line nsbox cannot read.
const ExitUsage = 2

// UsageError is a command-line mistake: one line naming the flag or the
// command, with the fix when there is an obvious one, and exit status 2.
func UsageError(c *cli.Context, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return cli.Exit(fmt.Sprintf("%s (see `%s --help`)", msg, helpName(c)), ExitUsage)
}

// helpName is the command line that shows c's help: "nsbox session rm".
func helpName(c *cli.Context) string {
	if c.Command != nil && c.Command.HelpName != "" {
		return c.Command.HelpName
	}
	return c.App.Name
}

var (
	reInvalidValue = regexp.MustCompile(`^invalid value "(.*)" for flag -([^:]+): (.*)$`)
	reUndefined    = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	reNoArgument   = regexp.MustCompile(`^flag needs an argument: -+(.*)$`)
)

// OnUsageError rewrites the flag package's parse errors into one line
// about the flag, instead of the error followed by the whole help.
func OnUsageError(c *cli.Context, err error, _ bool) error {
	flags := c.App.Flags
	if c.Command != nil {
		flags = c.Command.Flags
	}
	msg := err.Error()
	if m := reInvalidValue.FindStringSubmatch(msg); m != nil {
		return UsageError(c, "--%s %s: %s", m[2], m[1], valueHint(findFlag(flags, m[2]), m[1]))
	}
	if m := reUndefined.FindStringSubmatch(msg); m != nil {
		name := m[1]
		var names []string
		for _, f := range flags {
			names = append(names, f.Names()...)
		}
		if s := nearest(names, name); s != "" {
			return UsageError(c, "unknown flag -%s%s; did you mean -%s%s?", dashes(name), name, dashes(s), s)
		}
		return UsageError(c, "unknown flag -%s%s", dashes(name), name)
	}
	if m := reNoArgument.FindStringSubmatch(msg); m != nil {
		return UsageError(c, "--%s needs a value", m[1])
	}
	return UsageError(c, "%s", msg)
}

func dashes(name string) string {
	if len(name) > 1 {
		return "-"
	}
	return ""
}

// valueHint says what a flag's value should look like.
func valueHint(f cli.Flag, got string) string {
	switch f.(type) {
	case *cli.DurationFlag:
		if isNumber(got) {
			return fmt.Sprintf("a duration needs a unit: %ss, %sm or %sh", got, got, got)
		}
		return "not a duration (e.g. 30s, 5m, 1h30m)"
	case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
		return "not a whole number"
	case *cli.Float64Flag:
		return "not a number"
	case *cli.BoolFlag:
		return "not true or false (write --flag=false to turn it off)"
	}
	return "invalid value"
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && r != '.' {
			return false
		}
	}
	return true
}

func findFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// UnknownCommand is the Action of the app and of every command that only
// groups subcommands: without arguments it shows the help; with an
// unknown one it names it and suggests the nearest command.
func UnknownCommand(c *cli.Context) error {
	if !c.Args().Present() {
		if c.Command == nil || c.Command.Name == c.App.Name {
			return cli.ShowAppHelp(c)
		}
		return cli.ShowSubcommandHelp(c)
	}
	cmds := c.App.Commands
	if c.Command != nil && len(c.Command.Subcommands) > 0 {
		cmds = c.Command.Subcommands
	}
	name := c.Args().First()
	if s := nearestCommand(cmds, name); s != "" {
		return UsageError(c, "unknown command %q; did you mean %q?", name, s)
	}
	return UsageError(c, "unknown command %q", name)
}

// nearestCommand is the visible command whose name is closest to name,
// or "" when none is close.
func nearestCommand(cmds []*cli.Command, name string) string {
	var names []string
	for _, c := range cmds {
		if !c.Hidden && c.Name != "help" {
			names = append(names, c.Name)
		}
	}
	return nearest(names, name)
}

// nearest is the name in names closest to name by Jaro-Winkler similarity
// (as urfave/cli's own suggestions), or "" when none comes near.
func nearest(names []string, name string) string {
	best, score := "", 0.7
	for _, n := range names {
		if d := smetrics.JaroWinkler(n, name, 0.7, 4); d > score {
			best, score = n, d
		}
	}
	return best
}

// SetUsageHandlers installs OnUsageError and UnknownCommand on every
// command under cmds.
func SetUsageHandlers(cmds []*cli.Command) {
	for _, c := range cmds {
		c.OnUsageError = OnUsageError
		if len(c.Subcommands) > 0 {
			if c.Action == nil {
				c.Action = UnknownCommand
			}
			SetUsageHandlers(c.Subcommands)
		}
	}
}
