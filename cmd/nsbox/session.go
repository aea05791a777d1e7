package main

import (
	"bufio"
	"bytes"
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
)

func socketFlag() cli.Flag {
	return &cli.StringFlag{Name: "socket", Value: agentapi.DefaultSocket, Usage: "daemon `SOCKET`", EnvVars: []string{"NSBOX_SOCKET"}}
}

func sessionClient(c *cli.Context) *client.Client { return &client.Client{Socket: c.String("socket")} }

func sessionCommand() *cli.Command {
	return &cli.Command{
		Name:  "session",
		Usage: "stateful Python sessions in the daemon (variables, imports and files persist)",
		Subcommands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "start a session and print its id",
				ArgsUsage: " ",
				Flags: []cli.Flag{
					socketFlag(),
					&cli.StringFlag{Name: "rootfs", Usage: "rootfs `NAME` (default: the daemon's)"},
					&cli.DurationFlag{Name: "idle-timeout", Usage: "end the session after this long unused (default: the daemon's)"},
					&cli.DurationFlag{Name: "timeout", Usage: "default timeout of each exec"},
					&cli.StringFlag{Name: "memory", Usage: "memory limit for the session's life"},
					&cli.StringSliceFlag{Name: "env", Usage: "set `K=V` in the session (repeatable)"},
				},
				Action: sessionCreate,
			},
			{
				Name:      "exec",
				Usage:     "run Python code in a session (CODE, or - / nothing for stdin)",
				ArgsUsage: "ID [CODE|-]",
				Flags: []cli.Flag{
					socketFlag(),
					&cli.DurationFlag{Name: "timeout", Usage: "timeout of this exec (default: the session's)"},
					&cli.BoolFlag{Name: "json", Usage: "print the whole result as JSON"},
				},
				Action: sessionExec,
			},
			{Name: "ls", Usage: "list sessions", Flags: []cli.Flag{socketFlag(), &cli.BoolFlag{Name: "json"}}, Action: sessionList},
			{Name: "rm", Usage: "end sessions", ArgsUsage: "ID...", Flags: []cli.Flag{socketFlag()}, Action: sessionRemove},
			{
				Name:      "cp",
				Usage:     "copy a file into (LOCAL ID:PATH) or out of (ID:PATH LOCAL) a session's /workspace; - is stdin/stdout",
				ArgsUsage: "SRC DST",
				Flags:     []cli.Flag{socketFlag()},
				Action:    sessionCopy,
			},
		},
	}
}

func sessionCreate(c *cli.Context) error {
	req := &agentapi.SessionRequest{Rootfs: c.String("rootfs"), IdleTimeoutMs: c.Duration("idle-timeout").Milliseconds()}
	var lim agentapi.Limits
	lim.TimeoutMs = c.Duration("timeout").Milliseconds()
	if m := c.String("memory"); m != "" {
		n, err := parseSize(m)
		if err != nil {
			return fmt.Errorf("--memory: %w", err)
		}
		lim.MemoryBytes = n
	}
	if lim != (agentapi.Limits{}) {
		req.Limits = &lim
	}
	for _, kv := range c.StringSlice("env") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("--env %q: want K=V", kv)
		}
		if req.Env == nil {
			req.Env = map[string]string{}
		}
		req.Env[k] = v
	}
	s, err := sessionClient(c).CreateSession(c.Context, req)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.App.Writer, s.ID)
	return nil
}

func sessionExec(c *cli.Context) error {
	id, code := c.Args().Get(0), c.Args().Get(1)
	if id == "" || c.NArg() > 2 {
		return errors.New("usage: nsbox session exec ID [CODE|-]")
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
	if c.Bool("json") {
		res, err := cl.Exec(c.Context, id, req)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	res, err := cl.ExecStream(c.Context, id, req, printChunk)
	if err != nil {
		return err
	}
	printRich(c.App.Writer, os.Stderr, res)
	if res.Status != agentapi.StatusOK {
		return &exitError{code: 1, err: fmt.Errorf("exec: %s", res.Status)}
	}
	return nil
}

// printChunk writes streamed output to the terminal.
func printChunk(ev agentapi.Event) {
	switch ev.Type {
	case agentapi.EventStdout:
		os.Stdout.WriteString(ev.Data)
	case agentapi.EventStderr:
		os.Stderr.WriteString(ev.Data)
	}
}

// printRich prints what a cell returned besides its output.
func printRich(out, errw io.Writer, res *agentapi.RunResult) {
	if res.Value != "" {
		fmt.Fprintln(out, res.Value)
	}
	if e := res.Exception; e != nil {
		fmt.Fprint(errw, e.Traceback)
	}
	for i, f := range res.Figures {
		fmt.Fprintf(errw, "[figure %d: %s, %d bytes base64; use --json to get it]\n", i+1, f.Mime, len(f.DataBase64))
	}
	for _, f := range res.Files {
		fmt.Fprintf(errw, "[file %s: %d bytes]\n", f.Path, f.Size)
	}
	switch res.Status {
	case agentapi.StatusTimeout:
		fmt.Fprintln(errw, "[timeout: the cell was interrupted]")
	case agentapi.StatusOOM, agentapi.StatusCrashed:
		fmt.Fprintf(errw, "[%s: %s]\n", res.Status, res.Error)
	}
	if res.SessionDead {
		fmt.Fprintln(errw, "[the session is dead]")
	}
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
	fmt.Fprintln(tw, "ID\tOWNER\tROOTFS\tSTATE\tEXECS\tIDLE\tCREATED\tREASON")
	for _, s := range ss {
		owner := "-"
		if s.OwnerUID != nil {
			owner = strconv.FormatUint(uint64(*s.OwnerUID), 10)
			if u, err := user.LookupId(owner); err == nil {
				owner = u.Username
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", s.ID, owner, s.Rootfs, s.State, s.ExecCount,
			time.Since(s.LastUsedAt).Round(time.Second), s.CreatedAt.Local().Format(time.DateTime), s.DeadReason)
	}
	return tw.Flush()
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

// splitRemote parses ID:PATH.
func splitRemote(s string) (id, p string, ok bool) {
	id, p, ok = strings.Cut(s, ":")
	return id, p, ok && id != "" && p != "" && !strings.ContainsRune(id, '/')
}

func sessionCopy(c *cli.Context) error {
	if c.NArg() != 2 {
		return errors.New("usage: nsbox session cp LOCAL ID:PATH | ID:PATH LOCAL")
	}
	src, dst := c.Args().Get(0), c.Args().Get(1)
	cl := sessionClient(c)
	if id, p, ok := splitRemote(dst); ok {
		var r io.Reader = os.Stdin
		if src != "-" {
			f, err := os.Open(src)
			if err != nil {
				return err
			}
			defer f.Close()
			r = f
		}
		return cl.PutFile(c.Context, id, p, r)
	}
	id, p, ok := splitRemote(src)
	if !ok {
		return fmt.Errorf("one of %q and %q must be ID:PATH", src, dst)
	}
	data, err := cl.GetFile(c.Context, id, p)
	if err != nil {
		return err
	}
	if dst == "-" {
		_, err = os.Stdout.Write(data)
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}

func replCommand() *cli.Command {
	return &cli.Command{
		Name:  "repl",
		Usage: "an interactive Python prompt in a fresh session (ended on exit)",
		Flags: []cli.Flag{
			socketFlag(),
			&cli.StringFlag{Name: "rootfs", Usage: "rootfs `NAME` (default: the daemon's)"},
		},
		Action: repl,
	}
}

func repl(c *cli.Context) error {
	cl := sessionClient(c)
	s, err := cl.CreateSession(c.Context, &agentapi.SessionRequest{Rootfs: c.String("rootfs")})
	if err != nil {
		return err
	}
	defer cl.DeleteSession(context.WithoutCancel(c.Context), s.ID)
	fmt.Fprintf(os.Stderr, "nsbox session %s on rootfs %s; Ctrl-D to quit\n", s.ID, s.Rootfs)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	for {
		code, ok := readCell(in, os.Stderr)
		if !ok {
			fmt.Fprintln(os.Stderr)
			return nil
		}
		if strings.TrimSpace(code) == "" {
			continue
		}
		res, err := cl.ExecStream(c.Context, s.ID, &agentapi.ExecRequest{Code: code}, printChunk)
		if err != nil {
			return err
		}
		printRich(os.Stdout, os.Stderr, res)
		if res.SessionDead {
			return &exitError{code: 1, err: errors.New("the session died")}
		}
	}
}

// readCell reads one cell like Python's prompt: a line, plus continuation
// lines while it opens a block (ends with ':' or '\'), or brackets or a
// triple-quoted string are open; a block ends on an empty line.
func readCell(in *bufio.Scanner, prompt io.Writer) (string, bool) {
	var buf bytes.Buffer
	fmt.Fprint(prompt, ">>> ")
	block := false
	for in.Scan() {
		line := in.Text()
		buf.WriteString(line + "\n")
		trimmed := strings.TrimRight(line, " \t")
		if strings.HasSuffix(trimmed, ":") || strings.HasSuffix(trimmed, "\\") {
			block = true
		}
		if needsMore(buf.String()) || (block && trimmed != "") {
			fmt.Fprint(prompt, "... ")
			continue
		}
		return buf.String(), true
	}
	return buf.String(), buf.Len() > 0
}

// needsMore reports whether code has open brackets or an open triple
// quote (a rough scan that skips string literals and comments).
func needsMore(code string) bool {
	depth := 0
	for i := 0; i < len(code); i++ {
		switch ch := code[i]; ch {
		case '#':
			for i < len(code) && code[i] != '\n' {
				i++
			}
		case '"', '\'':
			q := string(ch)
			if strings.HasPrefix(code[i:], q+q+q) {
				end := strings.Index(code[i+3:], q+q+q)
				if end < 0 {
					return true
				}
				i += 3 + end + 2
				continue
			}
			for i++; i < len(code) && code[i] != ch && code[i] != '\n'; i++ {
				if code[i] == '\\' {
					i++
				}
			}
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		}
	}
	return depth > 0 || strings.HasSuffix(strings.TrimRight(code, "\n"), "\\")
}
