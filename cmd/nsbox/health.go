package main

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/cmd/nsbox/internal/cmdline"
)

// healthCommand is `nsbox health`: one GET /v1/health through the socket,
// for liveness and readiness probes (a Kubernetes exec probe, a systemd
// ExecStartPost, a script waiting for the daemon). Exit 0 when the daemon
// answers ok, 1 otherwise, with the reason on stderr.
func healthCommand() *cli.Command {
	return &cli.Command{
		Name:  "health",
		Usage: "check that the daemon answers on its socket (exit 0) — for probes and scripts",
		Flags: []cli.Flag{
			socketFlag(),
			&cli.DurationFlag{Name: "timeout", Value: 5 * time.Second, Usage: "give up after `DURATION`"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print nothing when healthy"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cmdline.UsageError(c, "health takes no arguments (got %q)", c.Args().First())
			}
			if c.Duration("timeout") <= 0 {
				return cmdline.UsageError(c, "--timeout must be positive (got %s)", c.Duration("timeout"))
			}
			ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
			defer cancel()
			h, err := sessionClient(c).Health(ctx)
			if err == nil && h.Status != "ok" {
				err = fmt.Errorf("the nsbox daemon at %s answered status %q, not ok", c.String("socket"), h.Status)
			}
			if err != nil {
				return &exitError{code: 1, err: fmt.Errorf("health: %w", err)}
			}
			if !c.Bool("quiet") {
				fmt.Fprintf(c.App.Writer, "ok (api %s) at %s\n", h.APIVersion, c.String("socket"))
			}
			return nil
		},
	}
}
