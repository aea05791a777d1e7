package main

import (
	"fmt"
	"github.com/nsbox/nsbox/cmd/nsbox/internal/cmdline"
	"io"
	"os"
	"path"
	"strings"
)

// checkTerminalStdin refuses an interpreter started without a program
// while stdin is a terminal: exec does not pass a terminal through (through
// the daemon, stdin is read to its end before the run starts), so such a
// run would see an empty program and exit 0 at once, saying nothing.
func checkTerminalStdin(argv []string) error {
	if !cmdline.IsTerminal(os.Stdin) || !readsProgramFromStdin(argv) {
		return nil
	}
	return &exitError{code: cmdline.ExitUsage, err: fmt.Errorf("exec: %s would read its program from stdin, which is a terminal; "+
		"nsbox exec does not run interactive programs: for a Python prompt use `nsbox repl`, "+
		"or pipe the code in (echo 'print(1)' | nsbox exec -- python3 -)", strings.Join(argv, " "))}
}

// readsProgramFromStdin reports whether argv is a Python or shell
// interpreter given no program: no script, no -c or -m.
func readsProgramFromStdin(argv []string) bool {
	switch base := path.Base(argv[0]); {
	case base == "python" || strings.HasPrefix(base, "python3"), base == "sh" || base == "bash" || base == "dash":
	default:
		return false
	}
	for _, a := range argv[1:] {
		if a == "-c" || a == "-m" || !strings.HasPrefix(a, "-") {
			return false
		}
	}
	return true
}

// execStdin is the stdin of a run: what is piped or redirected in, never a
// terminal (see checkTerminalStdin), through the daemon or in-process alike.
func execStdin() io.Reader {
	if cmdline.IsTerminal(os.Stdin) {
		return nil
	}
	return os.Stdin
}
