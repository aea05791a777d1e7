// Package repl is `nsbox repl`: an interactive Python prompt on a daemon
// session, with line editing and history at a terminal (golang.org/x/term)
// and Ctrl-C that interrupts the running cell, not the REPL.
package repl

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
)

// errInterrupt is Ctrl-C at a prompt.
var errInterrupt = errors.New("KeyboardInterrupt")

// lineReader reads the REPL's input a line at a time.
type lineReader interface {
	// ReadLine shows prompt and reads a line: io.EOF at the end of the
	// input, errInterrupt on Ctrl-C.
	ReadLine(prompt string) (string, error)
	// Release gives the terminal back as it was, while a cell runs and at
	// exit; ReadLine takes it again.
	Release()
}

// Options are one REPL's session and terminal.
type Options struct {
	Client  *client.Client
	Session *agentapi.Session // made by the caller, who ends it
	Figures string            // where figures go; "": a new directory under $TMPDIR
	Stdin   *os.File          // a terminal (line editing) or not (plain lines)
	Stdout  io.Writer
	Stderr  io.Writer
}

// ErrSessionDied ends a REPL whose session died (out of memory, crashed).
var ErrSessionDied = errors.New("the session died")

// Run reads cells and runs them in the session until the input ends
// (Ctrl-D). Ctrl-C interrupts the running cell; SIGTERM and SIGHUP end
// the session and exit.
func Run(ctx context.Context, o Options) error {
	r := &replState{cl: o.Client, id: o.Session.ID, figDir: o.Figures, stdout: o.Stdout, stderr: o.Stderr}
	in := newLineReader(o.Stdin, o.Stderr)
	defer in.Release()
	r.catchSignals(in)
	defer func() {
		signal.Stop(r.sigs)
		close(r.sigs)
	}()

	fmt.Fprintf(o.Stderr, "nsbox session %s on rootfs %s; Ctrl-C interrupts, Ctrl-D quits\n", o.Session.ID, o.Session.Rootfs)
	for {
		code, err := readCell(in)
		switch {
		case errors.Is(err, errInterrupt):
			fmt.Fprintln(o.Stderr, "KeyboardInterrupt")
			continue
		case errors.Is(err, io.EOF):
			fmt.Fprintln(o.Stderr)
			return nil
		case err != nil:
			return err
		}
		if strings.TrimSpace(code) == "" {
			continue
		}
		in.Release()
		res, err := r.exec(ctx, code)
		if errors.Is(err, errInterrupt) {
			fmt.Fprintln(o.Stderr, "KeyboardInterrupt")
			continue
		}
		if err != nil {
			return err
		}
		PrintResult(o.Stdout, o.Stderr, res, r.saveFigure)
		switch res.Status {
		case agentapi.StatusTimeout:
			fmt.Fprintln(o.Stderr, "[timeout: the cell was interrupted]")
		case agentapi.StatusOOM, agentapi.StatusCrashed:
			fmt.Fprintf(o.Stderr, "[%s: %s]\n", res.Status, res.Error)
		}
		if res.SessionDead {
			return ErrSessionDied
		}
	}
}

// replState is one REPL's session and the cell it runs.
type replState struct {
	cl     *client.Client
	id     string
	figDir string
	cells  int
	sigs   chan os.Signal
	stdout io.Writer
	stderr io.Writer

	mu     sync.Mutex
	cancel context.CancelFunc // the running cell's; nil between cells
	midRow bool               // the cell's output did not end its line
}

// catchSignals makes Ctrl-C (SIGINT) interrupt the running cell: the
// request ends, and the daemon interrupts the cell with a KeyboardInterrupt
// and keeps the session. Between cells with a pipe for stdin, and on
// SIGTERM or SIGHUP, the REPL ends its session and exits.
func (r *replState) catchSignals(in lineReader) {
	r.sigs = make(chan os.Signal, 1)
	signal.Notify(r.sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		for sig := range r.sigs {
			r.mu.Lock()
			cancel := r.cancel
			r.cancel = nil
			r.mu.Unlock()
			if sig == os.Interrupt && cancel != nil {
				cancel()
				continue
			}
			if _, tty := in.(*termReader); sig == os.Interrupt && tty {
				// A Ctrl-C a moment too late for the cell it meant to
				// stop: at a terminal the prompt reads Ctrl-C as a key.
				continue
			}
			in.Release()
			ctx, done := context.WithTimeout(context.Background(), 5*time.Second)
			_ = r.cl.DeleteSession(ctx, r.id)
			done()
			fmt.Fprintln(r.stderr)
			os.Exit(128 + int(sig.(syscall.Signal)))
		}
	}()
}

// exec runs one cell, streaming its output. Ctrl-C cancels its request
// (errInterrupt), and the daemon interrupts the cell.
func (r *replState) exec(ctx context.Context, code string) (*agentapi.RunResult, error) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.mu.Lock()
	r.cancel, r.midRow = cancel, false
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.cancel = nil
		if r.midRow {
			fmt.Fprintln(r.stdout) // the next prompt starts its own line
		}
		r.mu.Unlock()
	}()
	r.cells++
	res, err := r.cl.ExecStream(cctx, r.id, &agentapi.ExecRequest{Code: code}, func(ev agentapi.Event) {
		PrintChunk(r.stdout, r.stderr, ev)
		if (ev.Type == agentapi.EventStdout || ev.Type == agentapi.EventStderr) && ev.Data != "" {
			r.mu.Lock()
			r.midRow = !strings.HasSuffix(ev.Data, "\n")
			r.mu.Unlock()
		}
	})
	if err != nil && cctx.Err() != nil && ctx.Err() == nil {
		return nil, errInterrupt
	}
	return res, err
}

// saveFigure writes a cell's figure to a file under --figures (by
// default a directory made for this REPL) and returns its path.
func (r *replState) saveFigure(i int, f agentapi.Figure) (string, error) {
	if r.figDir == "" {
		d, err := os.MkdirTemp("", "nsbox-repl-"+r.id+"-")
		if err != nil {
			return "", err
		}
		r.figDir = d
	}
	data, err := base64.StdEncoding.DecodeString(f.DataBase64)
	if err != nil {
		return "", err
	}
	ext := ".bin"
	switch f.Mime {
	case "image/png":
		ext = ".png"
	case "image/svg+xml":
		ext = ".svg"
	case "image/jpeg":
		ext = ".jpg"
	}
	p := filepath.Join(r.figDir, fmt.Sprintf("cell%d-figure%d%s", r.cells, i+1, ext))
	if err := os.MkdirAll(r.figDir, 0o755); err != nil {
		return "", err
	}
	return p, os.WriteFile(p, data, 0o644)
}
