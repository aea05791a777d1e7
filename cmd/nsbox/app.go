package main

import (
	"errors"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/cmd/nsbox/internal/cmdline"
	"github.com/nsbox/nsbox/cmd/nsbox/internal/rootfscmd"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit statuses of nsbox itself (a command run by `nsbox exec` exits with
// its own): 1 for errors, cmdline.ExitUsage (2) for a command line nsbox cannot
// read, exitBusy (75, EX_TEMPFAIL) when the daemon stayed full, 124 for a
// timeout, 130 when interrupted and 137 for a run killed by a limit.
const (
	exitBusy        = 75
	exitTimeout     = 124
	exitInterrupted = 130
	exitKilled      = 137
)

func newApp() *cli.App {
	app := &cli.App{
		Name:                 "nsbox",
		Usage:                "run untrusted code in fresh Linux sandboxes",
		Version:              version,
		EnableBashCompletion: true,
		Suggest:              true,
		OnUsageError:         cmdline.OnUsageError,
		Action:               cmdline.UnknownCommand,
		// main prints errors and exits with exitCode; urfave/cli must not
		// exit on its own.
		ExitErrHandler: func(*cli.Context, error) {},
		Commands: []*cli.Command{
			execCommand(),
			batchCommand(),
			rootfscmd.Command(),
			doctorCommand(),
			healthCommand(),
			daemonCommand(),
			sessionCommand(),
			volumeCommand(),
			replCommand(),
			shellCommand(),
			benchCommand(),
			mcpCommand(),
			toolsCommand(),
		},
	}
	cmdline.SetUsageHandlers(app.Commands)
	return app
}

// run runs the command line args (os.Args).
func run(args []string) error {
	app := newApp()
	return app.Run(cmdline.ReorderArgs(app, args))
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
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return 1
}
