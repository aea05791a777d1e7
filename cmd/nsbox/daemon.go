package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

func daemonCommand() *cli.Command {
	return &cli.Command{
		Name:   "daemon",
		Usage:  "not built yet",
		Action: func(*cli.Context) error { return errors.New("daemon: not built yet") },
	}
}
