package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func newApp() *cli.App {
	return &cli.App{
		Name:                 "nsbox",
		Usage:                "run untrusted code in fresh Linux sandboxes",
		Version:              version,
		EnableBashCompletion: true,
		Commands: []*cli.Command{
			execCommand(),
			rootfsCommand(),
			doctorCommand(),
			daemonCommand(),
			sessionCommand(),
			replCommand(),
			benchCommand(),
			mcpCommand(),
			toolsCommand(),
		},
	}
}

// exitError carries a process exit code through urfave/cli.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}
