package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/cmd/nsbox/internal/cmdline"
)

func volumeCommand() *cli.Command {
	return &cli.Command{
		Name:  "volume",
		Usage: "named volumes in the daemon: size-capped, persistent, mounted by runs and sessions under /mnt",
		Subcommands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "make a volume of --size (16M to 1T)",
				ArgsUsage: "NAME",
				Flags: []cli.Flag{
					socketFlag(),
					&cli.StringFlag{Name: "size", Usage: "the volume's cap: `SIZE` like 512M or 1G", Required: true},
				},
				Action: volumeCreate,
			},
			{Name: "ls", Usage: "list volumes", Flags: []cli.Flag{socketFlag(), &cli.BoolFlag{Name: "json"}}, Action: volumeList},
			{Name: "rm", Usage: "remove volumes and their data (refused while a sandbox mounts one)", ArgsUsage: "NAME...", Flags: []cli.Flag{socketFlag()}, Action: volumeRemove},
			{
				Name:      "cp",
				Usage:     "copy a file into (LOCAL NAME:PATH) or out of (NAME:PATH LOCAL) a volume; - is stdin/stdout",
				ArgsUsage: "SRC DST",
				Flags:     []cli.Flag{socketFlag()},
				Action:    volumeCopy,
			},
		},
	}
}

func volumeCreate(c *cli.Context) error {
	if c.NArg() != 1 {
		return cmdline.UsageError(c, "usage: nsbox volume create NAME --size SIZE")
	}
	size, err := parseSize(c.String("size"))
	if err != nil {
		return cmdline.UsageError(c, "--size %q: %v", c.String("size"), err)
	}
	v, err := sessionClient(c).CreateVolume(c.Context, &agentapi.VolumeRequest{Name: c.Args().First(), SizeBytes: size})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "%s\t%s\n", v.Name, humanBytes(v.SizeBytes))
	return nil
}

func volumeList(c *cli.Context) error {
	vols, err := sessionClient(c).Volumes(c.Context)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(vols)
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tOWNER\tSIZE\tUSED\tIN USE")
	for _, v := range vols {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", v.Name, ownerName(v.OwnerUID), humanBytes(v.SizeBytes), humanBytes(v.UsedBytes), v.InUse)
	}
	return tw.Flush()
}

func volumeRemove(c *cli.Context) error {
	if c.NArg() == 0 {
		return cmdline.UsageError(c, "usage: nsbox volume rm NAME...")
	}
	cl := sessionClient(c)
	var errs []error
	for _, name := range c.Args().Slice() {
		if err := cl.DeleteVolume(c.Context, name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// volumeCopy is `nsbox volume cp`: one side is NAME:PATH, the other a
// local file or - (stdin or stdout).
func volumeCopy(c *cli.Context) error {
	cl := sessionClient(c)
	return copyRemote(c, "nsbox volume cp LOCAL NAME:PATH | NAME:PATH LOCAL", "NAME", cl.PutVolumeFile, cl.GetVolumeFile)
}
