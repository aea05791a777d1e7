package main

import (
	"context"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/cmd/nsbox/internal/cmdline"
	"github.com/nsbox/nsbox/cmd/nsbox/internal/repl"
)

func replCommand() *cli.Command {
	return &cli.Command{
		Name:  "repl",
		Usage: "an interactive Python prompt in a fresh session (ended on exit)",
		Description: `At a terminal the prompt edits lines (Left/Right, Ctrl-A/Ctrl-E, Ctrl-U/Ctrl-K,
Ctrl-W) and keeps a history (Up/Down); Tab indents. Ctrl-C interrupts the
running cell (KeyboardInterrupt: the session and its variables live on) or,
at a prompt, drops what was typed, a pending block or an unclosed bracket
included. Ctrl-D on an empty line quits and ends the session. Figures a cell
draws are saved as files under --figures.`,
		ArgsUsage: " ",
		Flags: []cli.Flag{
			socketFlag(),
			&cli.StringFlag{Name: "rootfs", Usage: "rootfs `NAME`", DefaultText: "the daemon's"},
			&cli.StringFlag{Name: "figures", Usage: "save the figures cells draw in `DIR`", DefaultText: "a new directory under $TMPDIR"},
		},
		Action: runRepl,
	}
}

func runRepl(c *cli.Context) error {
	if c.NArg() > 0 {
		return cmdline.UsageError(c, "repl takes no arguments (got %q)", c.Args().First())
	}
	cl := sessionClient(c)
	s, err := cl.CreateSession(c.Context, &agentapi.SessionRequest{Rootfs: c.String("rootfs")})
	if err != nil {
		return err
	}
	defer cl.DeleteSession(context.WithoutCancel(c.Context), s.ID)
	return repl.Run(c.Context, repl.Options{Client: cl, Session: s, Figures: c.String("figures"), Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
}
