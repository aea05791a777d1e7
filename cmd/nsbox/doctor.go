package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:   "doctor",
		Usage:  "not built yet",
		Action: func(*cli.Context) error { return errors.New("doctor: not built yet") },
	}
}
