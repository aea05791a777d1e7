package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

func rootfsCommand() *cli.Command {
	return &cli.Command{
		Name:   "rootfs",
		Usage:  "not built yet",
		Action: func(*cli.Context) error { return errors.New("rootfs: not built yet") },
	}
}
