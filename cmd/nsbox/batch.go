package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/cmd/nsbox/internal/cmdline"
)

// batchCommand is `nsbox batch`: a JSON-lines file of runs through one
// POST /v1/runs:batch, the answer's lines on stdout as they come.
func batchCommand() *cli.Command {
	return &cli.Command{
		Name:      "batch",
		Usage:     "run many programs through the daemon in one request: JSON lines of runs in, JSON lines of results out",
		ArgsUsage: "[FILE|-]",
		Description: "Each line of FILE (or standard input) is one run, as the body of POST /v1/runs:\n" +
			"  {\"language\": \"python\", \"code\": \"print(1)\", \"limits\": {\"timeout_ms\": 5000}}\n" +
			"The runs go to the daemon as one batch (POST /v1/runs:batch): at most --concurrency at\n" +
			"once, waiting for run slots rather than failing when the daemon is busy. Every answer\n" +
			"line (\"result\" or \"error\", with the run's index, then \"done\") is printed as it\n" +
			"arrives; the counts go to standard error. Exit 0 once every run is answered, whatever\n" +
			"its status; 1 when the batch could not be run.",
		Flags: []cli.Flag{
			socketFlag(),
			&cli.IntFlag{Name: "concurrency", Usage: "runs at once, `N` from 1 to the daemon's max_concurrent", DefaultText: "max_concurrent"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return cmdline.UsageError(c, "batch takes one FILE (or - for standard input), got %d arguments", c.NArg())
			}
			name := c.Args().First()
			var in io.Reader = os.Stdin
			if name != "" && name != "-" {
				f, err := os.Open(name)
				if err != nil {
					return fmt.Errorf("batch: %w", err)
				}
				defer f.Close()
				in = f
			} else {
				name = "standard input"
			}
			runs, err := readRuns(in, name)
			if err != nil {
				return err
			}
			out := json.NewEncoder(c.App.Writer)
			sum, err := sessionClient(c).RunBatch(c.Context, &agentapi.BatchRequest{Runs: runs, Concurrency: c.Int("concurrency")},
				func(it agentapi.BatchItem) { _ = out.Encode(it) })
			if err != nil {
				return cmdline.FlagError(c, fmt.Errorf("batch: %w", err))
			}
			_ = out.Encode(agentapi.BatchItem{Type: agentapi.BatchDone, Index: -1, Done: sum})
			fmt.Fprintf(c.App.ErrWriter, "nsbox: batch: %d runs: %d ok, %d failed, %d not run, in %.1f s\n",
				sum.Runs, sum.OK, sum.Failed, sum.Errors, float64(sum.WallMs)/1000)
			return nil
		},
	}
}

// readRuns reads one run request per non-blank line, each decoded as
// strictly as the daemon would (an unknown field is an error naming its
// line).
func readRuns(in io.Reader, name string) ([]agentapi.RunRequest, error) {
	var runs []agentapi.RunRequest
	r := bufio.NewReader(in)
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if t := bytes.TrimSpace(b); len(t) > 0 {
			dec := json.NewDecoder(bytes.NewReader(t))
			dec.DisallowUnknownFields()
			var run agentapi.RunRequest
			if derr := dec.Decode(&run); derr != nil {
				return nil, fmt.Errorf("batch: %s:%d: %v (one run per line, as the body of POST /v1/runs)", name, line, derr)
			}
			if dec.More() {
				return nil, fmt.Errorf("batch: %s:%d: more than one JSON value on the line (one run per line)", name, line)
			}
			runs = append(runs, run)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("batch: reading %s: %w", name, err)
		}
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("batch: %s has no runs (one JSON run request per line)", name)
	}
	return runs, nil
}
