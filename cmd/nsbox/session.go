package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/cmd/nsbox/internal/cmdline"
	"github.com/nsbox/nsbox/cmd/nsbox/internal/repl"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/daemon/lang"
)

func socketFlag() cli.Flag {
	return &cli.StringFlag{Name: "socket", Value: agentapi.DefaultSocket, Usage: "daemon `SOCKET`", EnvVars: []string{"NSBOX_SOCKET"}}
}

func sessionClient(c *cli.Context) *client.Client { return &client.Client{Socket: c.String("socket")} }

func sessionCommand() *cli.Command {
	return &cli.Command{
		Name:  "session",
		Usage: "stateful sessions in the daemon, Python by default (variables, imports and files persist)",
		Subcommands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "start a session and print its id",
				ArgsUsage: " ",
				Flags: append([]cli.Flag{
					socketFlag(),
					&cli.StringFlag{Name: "rootfs", Usage: "rootfs `NAME`", DefaultText: "the daemon's"},
					&cli.StringFlag{Name: "language", Aliases: []string{"l"}, Usage: "the session's `LANGUAGE`: " + sessionLanguages(), DefaultText: lang.Default().Name},
					&cli.DurationFlag{Name: "idle-timeout", Usage: "end the session after `DURATION` unused", DefaultText: "the daemon's"},
					&cli.StringFlag{Name: "idle-action", Usage: "what the idle timeout does, `ACTION`: end, or pause (frozen until its lifetime ends)", DefaultText: "the daemon's"},
					&cli.BoolFlag{Name: "init", Usage: "run a minimal init as pid 1 (as nsbox exec --init): the interpreter is its child, orphans are reaped"},
					&cli.BoolFlag{Name: "processes", Usage: "start the sandbox's process agent with the session (a Python session), which nsbox session watch needs"},
				}, append(append(cmdline.LimitFlags(true, false), cmdline.NetworkFlags()...), cmdline.MountFlags()...)...),
				Action: sessionCreate,
			},
			{
				Name:      "exec",
				Usage:     "run code in a session, in its language (CODE, or - / nothing for stdin)",
				ArgsUsage: "ID [CODE|-]",
				Flags: []cli.Flag{
					socketFlag(),
					&cli.DurationFlag{Name: "timeout", Usage: "end this exec after `DURATION`", DefaultText: "the session's"},
					&cli.BoolFlag{Name: "json", Usage: "print the whole result as JSON"},
				},
				Action: sessionExec,
			},
			{Name: "ls", Usage: "list sessions", Flags: []cli.Flag{socketFlag(), &cli.BoolFlag{Name: "json"}}, Action: sessionList},
			{Name: "rm", Usage: "end sessions", ArgsUsage: "ID...", Flags: []cli.Flag{socketFlag()}, Action: sessionRemove},
			{Name: "pause", Usage: "freeze sessions: memory kept, no CPU, until resume or their next exec", ArgsUsage: "ID...",
				Flags: []cli.Flag{socketFlag()}, Action: sessionEach((*client.Client).PauseSession)},
			{Name: "resume", Usage: "thaw paused sessions", ArgsUsage: "ID...",
				Flags: []cli.Flag{socketFlag()}, Action: sessionEach((*client.Client).ResumeSession)},
			{Name: "fork", Usage: "branch a Python session: new sessions with its variables and a copy of its /workspace (prints their ids)", ArgsUsage: "ID",
				Flags: []cli.Flag{socketFlag(), &cli.IntFlag{Name: "count", Value: 1, Usage: "make `N` branches (1 to 16)"}}, Action: sessionFork},
			{Name: "park", Usage: "write Python sessions to the daemon's disk and end their sandboxes; their next exec or revive brings them back", ArgsUsage: "ID...",
				Flags: []cli.Flag{socketFlag()}, Action: sessionEach((*client.Client).ParkSession)},
			{Name: "revive", Usage: "bring parked sessions back now (their next exec would)", ArgsUsage: "ID...",
				Flags: []cli.Flag{socketFlag()}, Action: sessionRevive},
			{
				Name:      "cp",
				Usage:     "copy a file into (LOCAL ID:PATH) or out of (ID:PATH LOCAL) a session's /workspace; - is stdin/stdout",
				ArgsUsage: "SRC DST",
				Flags:     []cli.Flag{socketFlag()},
				Action:    sessionCopy,
			},
			sessionWatchCommand(),
			sessionPortCommand(),
		},
	}
}

// sessionLanguages names the built-in languages a session may run, from
// the language registry.
func sessionLanguages() string {
	var names []string
	for _, l := range lang.BuiltinInfo() {
		if l.Sessions {
			names = append(names, l.Name)
		}
	}
	return strings.Join(names, ", ")
}

func sessionCreate(c *cli.Context) error {
	if c.NArg() > 0 {
		return cmdline.UsageError(c, "session create takes no arguments (got %q)", c.Args().First())
	}
	req := &agentapi.SessionRequest{Rootfs: c.String("rootfs"), Language: c.String("language"), IdleTimeoutMs: c.Duration("idle-timeout").Milliseconds(),
		IdleAction: c.String("idle-action"), Init: c.Bool("init"), Processes: c.Bool("processes")}
	lim, err := cmdline.ReadLimits(c)
	if err != nil {
		return err
	}
	req.Limits = cmdline.WireLimits(lim)
	if req.Env, err = cmdline.ReadEnv(c); err != nil {
		return err
	}
	if req.Files, err = cmdline.ReadFiles(c); err != nil {
		return err
	}
	if req.Network, err = cmdline.ReadNetwork(c); err != nil {
		return err
	}
	if req.Volumes, req.Datasets, err = cmdline.ReadMounts(c); err != nil {
		return err
	}
	s, err := sessionClient(c).CreateSession(c.Context, req)
	if err != nil {
		return cmdline.FlagError(c, err)
	}
	fmt.Fprintln(c.App.Writer, s.ID)
	return nil
}

// sessionExec is `nsbox session exec`: its exit status follows the
// result as exec's does (1 for an exception, 124 for a timeout, 137 when
// a limit killed the session).
func sessionExec(c *cli.Context) error {
	id, code := c.Args().Get(0), c.Args().Get(1)
	if id == "" || c.NArg() > 2 {
		return cmdline.UsageError(c, "usage: nsbox session exec [flags] ID [CODE|-]")
	}
	if code == "" || code == "-" {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return err
		}
		code = string(b)
	}
	req := &agentapi.ExecRequest{Code: code, TimeoutMs: c.Duration("timeout").Milliseconds()}
	cl := sessionClient(c)
	var (
		res *agentapi.RunResult
		err error
	)
	if c.Bool("json") {
		res, err = cl.Exec(c.Context, id, req)
		if err == nil {
			enc := json.NewEncoder(c.App.Writer)
			enc.SetIndent("", "  ")
			err = enc.Encode(res)
		}
	} else {
		res, err = cl.ExecStream(c.Context, id, req, func(ev agentapi.Event) { repl.PrintChunk(os.Stdout, os.Stderr, ev) })
		if err == nil {
			repl.PrintResult(c.App.Writer, os.Stderr, res, nil)
		}
	}
	if err != nil {
		return cmdline.FlagError(c, err)
	}
	return verdict(res.Status, res.ExitCode, res.Signal, res.Error, container.Limits{Timeout: c.Duration("timeout")})
}

func sessionList(c *cli.Context) error {
	ss, err := sessionClient(c).Sessions(c.Context)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return json.NewEncoder(c.App.Writer).Encode(ss)
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tOWNER\tROOTFS\tLANGUAGE\tSTATE\tEXECS\tIDLE\tCREATED\tREASON")
	for _, s := range ss {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", s.ID, ownerName(s.OwnerUID), s.Rootfs, s.Language, s.State, s.ExecCount,
			time.Since(s.LastUsedAt).Round(time.Second), s.CreatedAt.Local().Format(time.DateTime), s.DeadReason)
	}
	return tw.Flush()
}

// ownerName names a session's or volume's owner for a listing: the user
// name when the host knows the uid, the uid otherwise, "-" for none.
func ownerName(uid *uint32) string {
	if uid == nil {
		return "-"
	}
	owner := strconv.FormatUint(uint64(*uid), 10)
	if u, err := user.LookupId(owner); err == nil {
		return u.Username
	}
	return owner
}

func sessionRemove(c *cli.Context) error {
	if c.NArg() == 0 {
		return errors.New("usage: nsbox session rm ID [ID]")
	}
	cl := sessionClient(c)
	var errs []error
	for _, id := range c.Args().Slice() {
		if err := cl.DeleteSession(c.Context, id); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// sessionEach is `nsbox session pause|resume ID...`: call on each id and
// print each session's state.
func sessionEach(call func(*client.Client, context.Context, string) (*agentapi.Session, error)) cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.NArg() == 0 {
			return cmdline.UsageError(c, "usage: nsbox session %s ID [ID...]", c.Command.Name)
		}
		cl := sessionClient(c)
		var errs []error
		for _, id := range c.Args().Slice() {
			s, err := call(cl, c.Context, id)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", id, err))
				continue
			}
			fmt.Fprintf(c.App.Writer, "%s %s\n", s.ID, s.State)
		}
		return errors.Join(errs...)
	}
}

// sessionFork is `nsbox session fork`: the branches' ids on stdout, what
// was not carried on stderr.
func sessionFork(c *cli.Context) error {
	if c.NArg() != 1 {
		return cmdline.UsageError(c, "usage: nsbox session fork [--count N] ID")
	}
	out, err := sessionClient(c).ForkSession(c.Context, c.Args().First(), c.Int("count"))
	if err != nil {
		return cmdline.FlagError(c, err)
	}
	for _, b := range out.Sessions {
		fmt.Fprintln(c.App.Writer, b.ID)
		printNotCarried(c, b.ID, b.NotCarried)
	}
	return nil
}

func sessionRevive(c *cli.Context) error {
	if c.NArg() == 0 {
		return cmdline.UsageError(c, "usage: nsbox session revive ID [ID...]")
	}
	cl := sessionClient(c)
	var errs []error
	for _, id := range c.Args().Slice() {
		s, err := cl.ReviveSession(c.Context, id)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
			continue
		}
		fmt.Fprintf(c.App.Writer, "%s %s\n", s.ID, s.State)
		printNotCarried(c, s.ID, s.NotCarried)
	}
	return errors.Join(errs...)
}

func printNotCarried(c *cli.Context, id string, nc []agentapi.NotCarried) {
	for _, n := range nc {
		name := n.Name
		if n.Context != "" {
			name = n.Context + ":" + n.Name
		}
		fmt.Fprintf(c.App.ErrWriter, "%s: not carried: %s: %s\n", id, name, n.Reason)
	}
}

// splitRemote parses ID:PATH.
func splitRemote(s string) (id, p string, ok bool) {
	id, p, ok = strings.Cut(s, ":")
	return id, p, ok && id != "" && p != "" && !strings.ContainsRune(id, '/')
}

func sessionCopy(c *cli.Context) error {
	cl := sessionClient(c)
	return copyRemote(c, "nsbox session cp LOCAL ID:PATH | ID:PATH LOCAL", "ID", cl.PutFile, cl.GetFile)
}

// copyRemote is a `cp` between a local file (or -, stdin or stdout) and
// KEY:PATH on the daemon (a session's or a volume's file), through put
// and get; key names KEY in the errors.
func copyRemote(c *cli.Context, usage, key string, put func(ctx context.Context, k, p string, r io.Reader) error,
	get func(ctx context.Context, k, p string) ([]byte, error)) error {
	if c.NArg() != 2 {
		return cmdline.UsageError(c, "usage: %s", usage)
	}
	src, dst := c.Args().Get(0), c.Args().Get(1)
	if k, p, ok := splitRemote(dst); ok {
		var r io.Reader = os.Stdin
		if src != "-" {
			f, err := os.Open(src)
			if err != nil {
				return err
			}
			defer f.Close()
			r = f
		}
		return put(c.Context, k, p, r)
	}
	k, p, ok := splitRemote(src)
	if !ok {
		return cmdline.UsageError(c, "one of %q and %q must be %s:PATH", src, dst, key)
	}
	data, err := get(c.Context, k, p)
	if err != nil {
		return err
	}
	if dst == "-" {
		_, err = os.Stdout.Write(data)
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}
