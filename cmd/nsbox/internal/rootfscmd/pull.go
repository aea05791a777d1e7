package rootfscmd

import (
	"fmt"
	"os"
	"time"

	"github.com/nsbox/nsbox/cmd/nsbox/internal/cmdline"
	"github.com/nsbox/nsbox/rootfs"
	"github.com/nsbox/nsbox/rootfs/importer"
	"github.com/nsbox/nsbox/rootfs/oci"
	"github.com/urfave/cli/v2"
)

// pullCommand is `nsbox rootfs pull`.
func pullCommand(store cli.Flag) *cli.Command {
	return &cli.Command{
		Name:      "pull",
		Usage:     "make a rootfs from an OCI image in a registry (layers applied with the import's rules)",
		ArgsUsage: "REF",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "name", Usage: "rootfs `NAME` (default: from REF, python:3.12-slim -> python-3.12-slim)"},
			&cli.StringFlag{Name: "platform", Usage: "the image's `OS/ARCH`, e.g. linux/amd64 (default: this machine's)"},
			&cli.BoolFlag{Name: "insecure", Usage: "allow plain http to a registry on this machine's loopback (only there)"},
			&cli.BoolFlag{Name: "force", Usage: "replace an existing rootfs of that name"},
			store,
		},
		Action: rootfsPull,
	}
}

func rootfsPull(c *cli.Context) error {
	if c.NArg() != 1 {
		return cmdline.UsageError(c, "give one image reference, e.g. nsbox rootfs pull python:3.12-slim")
	}
	ref := c.Args().First()
	name := c.String("name")
	if name == "" {
		name = oci.NameFor(ref)
	}
	ctx, cancel := signalContext(c)
	defer cancel()
	start := time.Now()
	pp := newProgressPrinter(os.Stderr)
	r, rep, err := oci.Pull(ctx, rootfs.Store{Root: c.String("store")}, ref, oci.Options{
		Name: name, Force: c.Bool("force"), Platform: c.String("platform"), Insecure: c.Bool("insecure"), Progress: pp.print,
	})
	pp.end()
	return imageDone(ctx.Err() != nil, r, rep, err, time.Since(start))
}

// importImage is `nsbox rootfs import` of an image archive.
func importImage(c *cli.Context, name, path string) error {
	ctx, cancel := signalContext(c)
	defer cancel()
	start := time.Now()
	pp := newProgressPrinter(os.Stderr)
	r, rep, err := oci.Import(ctx, rootfs.Store{Root: c.String("store")}, path, oci.Options{
		Name: name, Force: c.Bool("force"), Platform: c.String("platform"), Progress: pp.print,
	})
	pp.end()
	return imageDone(ctx.Err() != nil, r, rep, err, time.Since(start))
}

// imageDone reports a pull's or an image import's end.
func imageDone(interrupted bool, r *rootfs.Rootfs, rep *importer.Report, err error, took time.Duration) error {
	for _, p := range rep.StrippedSetid {
		fmt.Fprintf(os.Stderr, "stripped setuid/setgid: /%s\n", p)
	}
	if err != nil {
		if interrupted {
			return fmt.Errorf("interrupted; nothing was installed")
		}
		return err
	}
	if r.Meta.ArgvOnly {
		fmt.Fprintf(os.Stderr, "warning: %s\n", importer.ArgvOnlyWarning(r.Meta))
	}
	printSummary(r, took)
	return nil
}
