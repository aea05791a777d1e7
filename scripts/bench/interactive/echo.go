package interactive

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"time"

	"github.com/creack/pty"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
)

// echoScript puts its terminal in raw mode without the tty's own echo,
// says R, and becomes cat: each byte typed comes back once, from the
// program, as a shell's line editor echoes it.
const echoScript = "stty raw -echo && printf R && exec cat"

// echoes times n keystrokes' echoes on a pty on the host and through a
// terminal in session id, in turn.
func echoes(ctx context.Context, cl *client.Client, id string, n int) (host, box []time.Duration, err error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", echoScript)
	ptmx, err := pty.Start(cmd)
	if err != nil {
		return nil, nil, fmt.Errorf("a pty on the host: %w", err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		ptmx.Close()
		_ = cmd.Wait()
	}()
	hostEcho := &reader{next: func() ([]byte, error) {
		b := make([]byte, 64)
		k, err := ptmx.Read(b)
		return b[:k], err
	}}

	term, err := cl.OpenTerminal(ctx, id, &agentapi.TerminalRequest{Cmd: "/bin/sh", Args: []string{"-c", echoScript}})
	if err != nil {
		return nil, nil, err
	}
	defer term.Close()
	boxEcho := &reader{next: func() ([]byte, error) {
		p, exit, err := term.Next()
		if exit != nil {
			return nil, fmt.Errorf("the terminal's cat exited (%d)", exit.ExitCode)
		}
		return p, err
	}}
	// A read waiting for an echo that never comes returns when ctx ends,
	// and says so.
	defer context.AfterFunc(ctx, func() { ptmx.Close(); term.Close() })()
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
	}()

	if err := hostEcho.until('R'); err != nil {
		return nil, nil, fmt.Errorf("the host pty: %w", err)
	}
	if err := boxEcho.until('R'); err != nil {
		return nil, nil, fmt.Errorf("the terminal: %w", err)
	}
	for i := range n {
		key := byte('a' + i%26)
		t0 := time.Now()
		if _, err := ptmx.Write([]byte{key}); err != nil {
			return nil, nil, err
		}
		if err := hostEcho.until(key); err != nil {
			return nil, nil, fmt.Errorf("the host pty: %w", err)
		}
		host = append(host, time.Since(t0))
		t0 = time.Now()
		if err := term.Input([]byte{key}); err != nil {
			return nil, nil, err
		}
		if err := boxEcho.until(key); err != nil {
			return nil, nil, fmt.Errorf("the terminal: %w", err)
		}
		box = append(box, time.Since(t0))
	}
	return host, box, nil
}

// reader reads a terminal's output until a byte.
type reader struct {
	next func() ([]byte, error)
	buf  []byte
}

// until reads until b comes, and drops what came up to it.
func (r *reader) until(b byte) error {
	_, err := r.line(b)
	return err
}

// line reads until b comes and returns what came, up to b and with it.
func (r *reader) line(b byte) (string, error) {
	for {
		if i := bytes.IndexByte(r.buf, b); i >= 0 {
			l := string(r.buf[:i+1])
			r.buf = r.buf[i+1:]
			return l, nil
		}
		p, err := r.next()
		if err != nil {
			if err == io.EOF {
				err = fmt.Errorf("ended before %q came (%q)", b, r.buf)
			}
			return "", err
		}
		r.buf = append(r.buf, p...)
	}
}
