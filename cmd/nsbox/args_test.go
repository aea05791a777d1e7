package main

import (
	"strings"
	"testing"

	"github.com/nsbox/nsbox/cmd/nsbox/internal/cmdline"
)

// TestReorderArgs: flags after positional arguments are moved before them
// for the command being run; "--" and exec's command line stay untouched.
func TestReorderArgs(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"flag after id", "session rm ID --socket S", "session rm --socket S ID"},
		{"bool flag after code", "session exec ID CODE --json", "session exec --json ID CODE"},
		{"flags on both sides", "session exec --socket S ID --timeout 5s CODE", "session exec --socket S --timeout 5s ID CODE"},
		{"flag=value", "session rm ID --socket=S", "session rm --socket=S ID"},
		{"force after paths", "rootfs import NAME PATH --force", "rootfs import --force NAME PATH"},
		{"store value after paths", "rootfs import NAME PATH --store /s", "rootfs import --store /s NAME PATH"},
		{"stdin dash stays", "session exec ID - --json", "session exec --json ID -"},
		{"negative number is code", "session exec ID -1 --json", "session exec --json ID -1"},
		{"double dash stops", "session exec ID --json -- --not-a-flag", "session exec --json ID -- --not-a-flag"},
		{"unknown flag is a flag", "session rm ID --sockt S", "session rm --sockt ID S"},
		{"exec command line untouched", "exec --timeout 5s -- python3 -c x --json", "exec --timeout 5s -- python3 -c x --json"},
		{"exec without dashes keeps CMD's flags", "exec --json python3 -v script.py", "exec --json python3 -v script.py"},
		{"exec flags before CMD", "exec python3 --timeout 5s", "exec python3 --timeout 5s"},
		{"session cp", "session cp a.txt ID:a.txt --socket S", "session cp --socket S a.txt ID:a.txt"},
		{"unknown command untouched", "exce --timeout 5s x", "exce --timeout 5s x"},
		{"help untouched", "help session", "help session"},
		{"global flag first", "--help exec", "--help exec"},
		{"nothing to move", "session ls --json", "session ls --json"},
		{"completion flag stays last", "session rm ID --generate-bash-completion", "session rm ID --generate-bash-completion"},
	}
	app := newApp()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := cmdline.ReorderArgs(app, append([]string{"nsbox"}, strings.Fields(tc.in)...))
			if g := strings.Join(got[1:], " "); g != tc.want {
				t.Errorf("ReorderArgs(%q) = %q, want %q", tc.in, g, tc.want)
			}
		})
	}
}
