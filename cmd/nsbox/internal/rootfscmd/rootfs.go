// Package rootfscmd is `nsbox rootfs`: build, pull, import, list and
// remove the root filesystems in a store (the rootfs package), with a live
// progress line for builds and pulls.
package rootfscmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nsbox/nsbox/cmd/nsbox/internal/cmdline"
	"github.com/nsbox/nsbox/rootfs"
	"github.com/nsbox/nsbox/rootfs/build"
	"github.com/nsbox/nsbox/rootfs/importer"
	"github.com/nsbox/nsbox/rootfs/oci"
	"github.com/urfave/cli/v2"
)

// Command is `nsbox rootfs` and its subcommands.
func Command() *cli.Command {
	store := &cli.StringFlag{
		Name:    "store",
		Usage:   "rootfs store `DIR`",
		Value:   rootfs.DefaultStoreRoot,
		EnvVars: []string{"NSBOX_ROOTFS_STORE"},
	}
	return &cli.Command{
		Name:  "rootfs",
		Usage: "build, pull, import, list and remove the root filesystems sandboxes run in",
		Subcommands: []*cli.Command{
			{
				Name:      "build",
				Usage:     "build a rootfs from Debian packages (mmdebstrap): Python; datasci adds its libraries, Node.js, esbuild, git and curl",
				ArgsUsage: " ",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "profile", Usage: "package set `PROFILE`, required: " + profileChoices("")},
					&cli.StringFlag{Name: "name", Value: rootfs.DefaultName, Usage: "rootfs `NAME`"},
					&cli.StringFlag{Name: "mirror", Value: build.DefaultMirror, Usage: "Debian mirror `URL`"},
					&cli.StringFlag{Name: "suite", Value: build.DefaultSuite, Usage: "Debian `SUITE`"},
					&cli.BoolFlag{Name: "force", Usage: "replace an existing rootfs of that name"},
					store,
				},
				Action: rootfsBuild,
			},
			pullCommand(store),
			{
				Name:      "import",
				Usage:     "import a directory, a tar/tar.gz (e.g. docker export), an OCI image layout or a docker save archive as a rootfs",
				ArgsUsage: "NAME PATH",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "force", Usage: "replace an existing rootfs of that name"},
					&cli.StringFlag{Name: "platform", Usage: "for an archive of several images: the one for `OS/ARCH` (default: this machine's)"},
					store,
				},
				Action: rootfsImport,
			},
			{
				Name:   "list",
				Usage:  "list the rootfs trees in the store",
				Flags:  []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}, store},
				Action: rootfsList,
			},
			{
				Name:      "rm",
				Usage:     "remove a rootfs (refused while a sandbox uses it)",
				ArgsUsage: "NAME",
				Flags:     []cli.Flag{store},
				Action:    rootfsRemove,
			},
		},
	}
}

func signalContext(c *cli.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
}

func rootfsBuild(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("rootfs build takes no arguments (got %q): use --name and --profile", c.Args().First())
	}
	// No default: a build downloads hundreds of MiB and takes minutes, so
	// it starts only when asked for by name (a terminal or a script alike).
	if !c.IsSet("profile") {
		return cmdline.UsageError(c, "--profile is required, to say what to download and build: %s", profileChoices("--profile "))
	}
	ctx, cancel := signalContext(c)
	defer cancel()
	st := rootfs.Store{Root: c.String("store")}
	start := time.Now()
	pp := newProgressPrinter(os.Stderr)
	r, err := build.Run(ctx, st, build.Options{
		Name:    c.String("name"),
		Profile: c.String("profile"),
		Mirror:  c.String("mirror"),
		Suite:   c.String("suite"),
		Force:   c.Bool("force"),
	}, pp.print)
	pp.end()
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("rootfs build interrupted; nothing was installed")
		}
		return err
	}
	if t := r.Meta.Trim; t != nil {
		for _, p := range t.StrippedSetid {
			fmt.Fprintf(os.Stderr, "stripped setuid/setgid: /%s\n", p)
		}
		if len(t.RemovedDevices) > 0 {
			fmt.Fprintf(os.Stderr, "removed %d device nodes under the tree\n", len(t.RemovedDevices))
		}
		fmt.Printf("trimmed %s -> %s: purged %d packages, excluded %s\n", rootfs.HumanSize(t.BytesBefore),
			rootfs.HumanSize(r.Meta.SizeBytes), len(t.Purged), strings.Join(t.Excluded, " "))
	}
	printSummary(r, time.Since(start))
	return nil
}

// profileAbout says what building each profile costs, measured on a 2-core
// VM with a nearby mirror (README.md has the sizes).
var profileAbout = map[string]string{
	"datasci":  "Python with numpy, pandas, scipy, matplotlib, scikit-learn and more, Node.js, esbuild, git and curl; 650 MiB, 3 to 7 minutes",
	"minimal":  "python3 only; 108 MiB, about 40 s",
	"polyglot": "datasci, and R and Java (OpenJDK 17 with JShell) for the r and java languages",
}

// profileChoices lists the profiles with what each costs, each after
// prefix: "datasci (...) or minimal (...)".
func profileChoices(prefix string) string {
	var out []string
	for _, p := range build.Profiles() {
		if a, ok := profileAbout[p]; ok {
			p += " (" + a + ")"
		}
		out = append(out, prefix+p)
	}
	return strings.Join(out, " or ")
}

func rootfsImport(c *cli.Context) error {
	if c.NArg() != 2 {
		return fmt.Errorf("usage: nsbox rootfs import NAME PATH [--force]")
	}
	if f, err := oci.Detect(c.Args().Get(1)); err == nil && f != oci.NotImage {
		return importImage(c, c.Args().Get(0), c.Args().Get(1))
	}
	ctx, cancel := signalContext(c)
	defer cancel()
	st := rootfs.Store{Root: c.String("store")}
	start := time.Now()
	r, rep, err := importer.Run(ctx, st, c.Args().Get(0), c.Args().Get(1), c.Bool("force"))
	if rep != nil {
		for _, rj := range rep.Rejected {
			fmt.Fprintf(os.Stderr, "rejected %s: %s\n", rj.Path, rj.Reason)
		}
		for _, p := range rep.StrippedSetid {
			fmt.Fprintf(os.Stderr, "stripped setuid/setgid: %s\n", p)
		}
		for _, w := range rep.Warnings {
			fmt.Fprintf(os.Stderr, "warning: %s\n", w)
		}
	}
	if err != nil {
		return err
	}
	fmt.Printf("imported %d entries (%d rejected, %d setid bits stripped)\n", rep.Files, len(rep.Rejected), len(rep.StrippedSetid))
	printSummary(r, time.Since(start))
	return nil
}

func rootfsList(c *cli.Context) error {
	st := rootfs.Store{Root: c.String("store")}
	list, err := st.List()
	if err != nil {
		return err
	}
	if c.Bool("json") {
		metas := make([]rootfs.Meta, 0, len(list))
		for _, r := range list {
			metas = append(metas, r.Meta)
		}
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(metas)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPROFILE\tPYTHON\tNODE\tESBUILD\tPACKAGES\tSIZE\tCREATED\tDIGEST\tIMAGE")
	for _, r := range list {
		m := r.Meta
		image := "-"
		if m.Image != nil {
			image = shortDigest(m.Image.Digest)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.Name, m.Profile, pythonColumn(m),
			orDash(m.Version("nodejs")), orDash(m.Version("esbuild")), len(m.Packages), rootfs.HumanSize(m.SizeBytes), m.Created.Local().Format("2006-01-02 15:04"), shortDigest(m.Digest), image)
	}
	return tw.Flush()
}

func rootfsRemove(c *cli.Context) error {
	if c.NArg() != 1 {
		return fmt.Errorf("usage: nsbox rootfs rm NAME")
	}
	st := rootfs.Store{Root: c.String("store")}
	if err := st.Remove(c.Args().First()); err != nil {
		return err
	}
	fmt.Printf("removed %s\n", c.Args().First())
	return nil
}

func printSummary(r *rootfs.Rootfs, took time.Duration) {
	m := r.Meta
	fmt.Printf("rootfs %s ready in %s\n", r.Name, took.Round(100*time.Millisecond))
	fmt.Printf("  profile   %s\n  python    %s\n  node      %s\n  esbuild   %s\n  size      %s\n  packages  %d\n  digest    %s\n",
		m.Profile, pythonColumn(m), orDash(m.Version("nodejs")), orDash(m.Version("esbuild")),
		rootfs.HumanSize(m.SizeBytes), len(m.Packages), m.Digest)
	if im := m.Image; im != nil {
		fmt.Printf("  image     %s (%s, layers: %d)\n  from      %s\n", im.Digest, im.Platform, im.Layers, im.Ref)
	}
	fmt.Printf("  path      %s\n", r.Dir)
}

// pythonColumn is a rootfs's Python version, and "argv-only" when runs on
// it are commands only (no python3 the runner runs on).
func pythonColumn(m rootfs.Meta) string {
	switch {
	case m.ArgvOnly && m.Python != "":
		return m.Python + " (argv-only)"
	case m.ArgvOnly:
		return "argv-only"
	}
	return orDash(m.Python)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}
