// Package shell is `nsbox shell`: a terminal in a session's sandbox
// (agentapi/client.OpenTerminal) joined to the caller's, as `docker exec
// -it` joins a container's: the caller's terminal in raw mode (every key,
// Ctrl-C, Ctrl-Z and Ctrl-D included, goes to the sandbox's terminal,
// which acts on it), the window size following the caller's (SIGWINCH),
// the exit code passed back.
package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
)

// Options says where the shell runs and what it reads and writes.
type Options struct {
	Client  *client.Client
	Session string
	Request agentapi.TerminalRequest
	Stdin   *os.File
	Stdout  *os.File
}

// Run runs the terminal until its process ends and returns its exit
// code: the process's, or 128+N for one a signal N ended. When Stdin is
// not a terminal it is passed on as it is (no raw mode, the size 24x80).
func Run(ctx context.Context, o Options) (int, error) {
	in, out := int(o.Stdin.Fd()), int(o.Stdout.Fd())
	tty := term.IsTerminal(in)
	if tty {
		if w, h, err := term.GetSize(out); err == nil {
			o.Request.Cols, o.Request.Rows = uint16(w), uint16(h)
		}
	}
	t, err := o.Client.OpenTerminal(ctx, o.Session, &o.Request)
	if err != nil {
		return 0, err
	}
	defer t.Close()
	if tty {
		old, err := term.MakeRaw(in)
		if err != nil {
			return 0, fmt.Errorf("raw mode: %w", err)
		}
		defer term.Restore(in, old)
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				if w, h, err := term.GetSize(out); err == nil {
					_ = t.Resize(uint16(h), uint16(w))
				}
			}
		}()
	}
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := o.Stdin.Read(buf)
			if n > 0 && t.Input(buf[:n]) != nil {
				return
			}
			if err != nil {
				if !tty {
					_ = t.Input([]byte{4}) // end of input: Ctrl-D
				}
				return
			}
		}
	}()
	for {
		b, exit, err := t.Next()
		switch {
		case errors.Is(err, io.EOF):
			return 0, errors.New("the terminal's connection ended without its exit")
		case err != nil:
			return 0, err
		case exit != nil:
			if exit.Signal != 0 {
				return 128 + exit.Signal, nil
			}
			if exit.ExitCode < 0 {
				return 1, fmt.Errorf("the terminal ended: %s", exit.Status)
			}
			return int(exit.ExitCode), nil
		}
		if _, err := o.Stdout.Write(b); err != nil {
			return 0, err
		}
	}
}
