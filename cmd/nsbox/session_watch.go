package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/cmd/nsbox/internal/cmdline"
)

func sessionWatchCommand() *cli.Command {
	return &cli.Command{
		Name:      "watch",
		Usage:     "print the changes in a directory of a session's /workspace as they happen (a session made with --processes)",
		ArgsUsage: "ID [DIR]",
		Flags: []cli.Flag{
			socketFlag(),
			&cli.BoolFlag{Name: "recursive", Aliases: []string{"r"}, Usage: "watch the directories under DIR too"},
			&cli.BoolFlag{Name: "json", Usage: "print each line of the stream as JSON (docs/API.md)"},
		},
		Action: sessionWatch,
	}
}

// sessionWatch prints "TYPE NAME" per change until the directory goes
// (exit 0), the session ends (its error) or Ctrl-C.
func sessionWatch(c *cli.Context) error {
	if c.NArg() < 1 || c.NArg() > 2 {
		return cmdline.UsageError(c, "session watch takes a session ID and a directory (default: the workspace)")
	}
	enc := json.NewEncoder(os.Stdout)
	err := sessionClient(c).Watch(c.Context, c.Args().Get(0), c.Args().Get(1), c.Bool("recursive"), func(e agentapi.WatchEvent) {
		switch {
		case c.Bool("json"):
			_ = enc.Encode(e)
		case e.Type == agentapi.WatchStart:
			fmt.Fprintf(os.Stderr, "watching %s\n", e.Path)
		case e.Type == agentapi.WatchEnd:
			fmt.Fprintln(os.Stderr, "the directory is gone")
		default:
			fmt.Printf("%s %s\n", e.Type, e.Name)
		}
	})
	if errors.Is(err, c.Context.Err()) && c.Context.Err() != nil {
		return nil
	}
	return err
}
