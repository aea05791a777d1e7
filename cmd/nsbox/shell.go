package main

import (
	"context"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/cmd/nsbox/internal/cmdline"
	"github.com/nsbox/nsbox/cmd/nsbox/internal/shell"
)

func shellCommand() *cli.Command {
	return &cli.Command{
		Name:  "shell",
		Usage: "an interactive shell on a terminal in a sandbox: a fresh session (ended on exit) or --session's",
		Description: `The shell (bash -i -l, or COMMAND ARGS...) runs in the sandbox on a terminal
of its own, as the sandbox's user, under its limits. Your terminal is in raw
mode meanwhile: Ctrl-C, Ctrl-Z and Ctrl-D act in the sandbox's terminal as
at any shell; the window size follows yours. nsbox exits with the shell's
exit code (128+N when signal N ended it). A --session must have been
created with its process agent (nsbox session create --processes).`,
		ArgsUsage: "[-- COMMAND [ARGS...]]",
		Flags: []cli.Flag{
			socketFlag(),
			&cli.StringFlag{Name: "rootfs", Usage: "rootfs `NAME` of the fresh session", DefaultText: "the daemon's"},
			&cli.StringFlag{Name: "session", Usage: "open the terminal in session `ID` (left running on exit)"},
			&cli.StringFlag{Name: "cwd", Usage: "working `DIR`", DefaultText: "/workspace"},
		},
		Action: runShell,
	}
}

func runShell(c *cli.Context) error {
	if c.IsSet("session") && c.IsSet("rootfs") {
		return cmdline.UsageError(c, "--rootfs is for a fresh session; --session's has its own")
	}
	cl := sessionClient(c)
	id := c.String("session")
	if id == "" {
		s, err := cl.CreateSession(c.Context, &agentapi.SessionRequest{Rootfs: c.String("rootfs"), Processes: true})
		if err != nil {
			return err
		}
		id = s.ID
		defer cl.DeleteSession(context.WithoutCancel(c.Context), id)
	}
	req := agentapi.TerminalRequest{Cwd: c.String("cwd")}
	if c.NArg() > 0 {
		req.Cmd, req.Args = c.Args().First(), c.Args().Tail()
	}
	code, err := shell.Run(c.Context, shell.Options{Client: cl, Session: id, Request: req, Stdin: os.Stdin, Stdout: os.Stdout})
	if err != nil {
		return err
	}
	if code != 0 {
		return &exitError{code: code, err: errSilent}
	}
	return nil
}
