package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/termframe"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/terminal"
)

// terminalWriteTimeout is how long a client may leave the terminal's
// output unread before the terminal is ended (procs.SlowTimeout is the
// agent's side of the same bound).
const terminalWriteTimeout = 10 * time.Second

// handleTerminal opens a terminal in a session and, once it runs,
// switches the connection to terminal frames (agentapi.TerminalProtocol):
// input, resize and signal in; output, then the exit, out. The terminal
// is killed when the client goes, and ends with its session.
func (s *Server) handleTerminal(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), agentapi.TerminalProtocol) || !headerHas(r.Header, "Connection", "upgrade") {
		writeError(w, errdefs.Field("upgrade", "a terminal is a connection upgraded to %s (Connection: Upgrade, Upgrade: %s)", agentapi.TerminalProtocol, agentapi.TerminalProtocol))
		return
	}
	var req agentapi.TerminalRequest
	release, err := s.decode(w, r, &req)
	if err != nil {
		writeError(w, err)
		return
	}
	release()
	t, err := s.core.OpenTerminal(r.Context(), r.PathValue("id"), &req)
	if err != nil {
		writeError(w, err)
		return
	}
	defer t.Close()
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeError(w, fmt.Errorf("terminal: %w", err))
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Time{})
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n%s: %d\r\n\r\n",
		agentapi.TerminalProtocol, agentapi.HeaderTerminalPid, t.Pid())
	if brw.Flush() != nil {
		return
	}
	s.log.Info("terminal opened", "session", r.PathValue("id"), "pid", t.Pid())
	// The daemon's stop ends the session, and so the terminal: its
	// output loop then ends; the input loop ends with the connection.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	go func() {
		defer cancel()
		terminalInput(ctx, brw.Reader, t)
	}()
	why := terminalOutput(ctx, conn, t)
	s.log.Info("terminal closed", "session", r.PathValue("id"), "pid", t.Pid(), "end", why)
}

// terminalInput applies the client's frames until the connection ends
// or a frame is bad. What the terminal refuses (a resize out of range,
// input after its process ended) ends nothing: the terminal's end comes
// on the output side, with its exit, and input racing it (nsbox shell's
// Ctrl-D at the end of a piped stdin, as the command exits) must not
// cancel that before the exit is written.
func terminalInput(ctx context.Context, r *bufio.Reader, t *terminal.Terminal) {
	for {
		typ, p, err := termframe.Read(r)
		if err != nil {
			return
		}
		switch typ {
		case agentapi.FrameInput:
			_ = t.Input(ctx, p)
		case agentapi.FrameResize:
			rows, cols, err := termframe.ParseSize(p)
			if err != nil {
				return
			}
			_ = t.Resize(ctx, rows, cols)
		case agentapi.FrameSignal:
			sig, err := termframe.ParseSignal(p)
			if err != nil {
				return
			}
			_ = t.Signal(ctx, sig)
		default:
			return // not a frame of the protocol
		}
	}
}

// terminalOutput passes the terminal's output to the client, then its
// exit; it returns why it stopped.
func terminalOutput(ctx context.Context, conn net.Conn, t *terminal.Terminal) string {
	write := func(typ byte, p []byte) error {
		_ = conn.SetWriteDeadline(time.Now().Add(terminalWriteTimeout))
		return termframe.Write(conn, typ, p)
	}
	for {
		out, exit, err := t.Next(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return "the client went"
		case errors.Is(err, io.EOF):
			return "exited"
		case err != nil:
			_ = write(agentapi.FrameError, []byte(err.Error()))
			return err.Error()
		case exit != nil:
			b, _ := json.Marshal(exit)
			_ = write(agentapi.FrameExit, b)
			return exit.Status
		}
		if err := write(agentapi.FrameOutput, out); err != nil {
			return "writing to the client: " + err.Error()
		}
	}
}

// headerHas says whether a comma-separated header lists token.
func headerHas(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), token) {
				return true
			}
		}
	}
	return false
}
