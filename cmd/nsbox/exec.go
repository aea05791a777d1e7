package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

func execCommand() *cli.Command {
	return &cli.Command{
		Name:   "exec",
		Usage:  "not built yet",
		Action: func(*cli.Context) error { return errors.New("exec: not built yet") },
	}
}
