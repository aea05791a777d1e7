package main

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/cmd/nsbox/internal/cmdline"
)

// TestUsageErrors: a command line nsbox cannot read gets one line naming
// the flag or command, with the fix, exit status 2 and no help dump.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"duration without unit", []string{"exec", "--timeout", "5", "--", "true"}, []string{"--timeout 5:", "5s", "nsbox exec --help"}},
		{"duration garbage", []string{"session", "create", "--idle-timeout", "soon"}, []string{"--idle-timeout soon: not a duration"}},
		{"whole number", []string{"exec", "--pids", "many", "--", "true"}, []string{"--pids many: not a whole number"}},
		{"mistyped command", []string{"exce", "--", "true"}, []string{`unknown command "exce"; did you mean "exec"?`}},
		{"mistyped subcommand", []string{"session", "exce", "ID", "1"}, []string{`unknown command "exce"; did you mean "exec"?`, "nsbox session --help"}},
		{"mistyped flag", []string{"exec", "--timout", "5s", "--", "true"}, []string{"unknown flag --timout; did you mean --timeout?"}},
		{"flag without value", []string{"session", "rm", "--socket"}, []string{"--socket needs a value"}},
		{"zero limit", []string{"exec", "--memory", "0", "--", "true"}, []string{"--memory 0: must be positive"}},
		{"negative cpus", []string{"session", "create", "--cpus", "-1"}, []string{"--cpus -1: must be positive"}},
		{"bad size", []string{"session", "create", "--disk", "lots"}, []string{"--disk lots:"}},
		{"memory below the minimum", []string{"exec", "--memory", "1M", "--", "true"}, []string{"--memory 1M: below the minimum 8 MiB"}},
		{"cpus below the minimum", []string{"session", "create", "--cpus", "0.001"}, []string{"--cpus 0.001: below the minimum 0.01"}},
		{"mcp zero pids", []string{"mcp", "--pids", "0"}, []string{"--pids 0: must be positive"}},
		{"in-process above max", []string{"exec", "--no-daemon", "--timeout", "1h", "--", "true"},
			[]string{"--timeout 1h: above a default daemon's maximum 10m", "--above-max"}},
		{"in-process memory above max", []string{"exec", "--no-daemon", "--memory", "16G", "--", "true"},
			[]string{"--memory 16G: above a default daemon's maximum 8 GiB"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runApp(t, "", tc.args...)
			if code != cmdline.ExitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, cmdline.ExitUsage, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if n := strings.Count(strings.TrimSpace(stderr), "\n"); n > 0 || stdout != "" {
				t.Errorf("want one line on stderr and nothing on stdout; got stdout:\n%s\nstderr:\n%s", stdout, stderr)
			}
		})
	}
}

// TestOneDefaultPerFlag: the help shows each flag's default once (it
// showed "(default 15m) (default: 0s)").
func TestOneDefaultPerFlag(t *testing.T) {
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, c := range cmds {
			p := path + " " + c.Name
			for _, f := range c.Flags {
				s := f.String()
				if n := strings.Count(s, "(default"); n > 1 || strings.Contains(s, "(default: 0") {
					t.Errorf("%s: %s", p, s)
				}
			}
			walk(p, c.Subcommands)
		}
	}
	walk("nsbox", newApp().Commands)
}

// TestExecReadsProgramFromStdin: the interpreters exec refuses to start
// with a terminal for stdin.
func TestExecReadsProgramFromStdin(t *testing.T) {
	tests := []struct {
		argv []string
		want bool
	}{
		{[]string{"python3"}, true},
		{[]string{"/usr/bin/python3.11", "-q"}, true},
		{[]string{"python3", "-"}, true},
		{[]string{"bash"}, true},
		{[]string{"sh", "-s"}, true},
		{[]string{"python3", "-c", "print(1)"}, false},
		{[]string{"python3", "-m", "http.server"}, false},
		{[]string{"python3", "script.py"}, false},
		{[]string{"bash", "-c", "ls"}, false},
		{[]string{"ls"}, false},
		{[]string{"cat"}, false},
	}
	for _, tc := range tests {
		if got := readsProgramFromStdin(tc.argv); got != tc.want {
			t.Errorf("readsProgramFromStdin(%q) = %v, want %v", tc.argv, got, tc.want)
		}
	}
}

// TestFlagPlaceholders: every flag that takes a value names what it takes
// in the help (`--timeout DURATION`, not urfave/cli's `--timeout value`).
func TestFlagPlaceholders(t *testing.T) {
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, c := range cmds {
			name := path + " " + c.Name
			for _, f := range c.Flags {
				if vf, ok := f.(cli.VisibleFlag); ok && !vf.IsVisible() {
					continue
				}
				if _, ok := f.(*cli.BoolFlag); ok {
					continue
				}
				s := cli.FlagStringer(f)
				if flag, _, _ := strings.Cut(s, "\t"); strings.Contains(flag, " value") {
					t.Errorf("%s: %s", name, s)
				}
			}
			walk(name, c.Subcommands)
		}
	}
	walk("nsbox", newApp().Commands)
}
