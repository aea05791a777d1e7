package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/termframe"
)

// Terminal is a terminal open in a session (OpenTerminal): its input,
// resize and signal go to it, Next reads its output and then its exit.
// Input, Resize and Signal may be called beside Next.
type Terminal struct {
	// Pid is the terminal's process, as the sandbox numbers it.
	Pid uint32

	conn io.ReadWriteCloser
	br   *bufio.Reader
	wmu  sync.Mutex
}

// OpenTerminal opens a terminal in session id (created with
// SessionRequest.Processes) over a connection of its own, upgraded to
// agentapi.TerminalProtocol. ctx bounds the opening only; Close ends it.
func (c *Client) OpenTerminal(ctx context.Context, id string, req *agentapi.TerminalRequest) (*Terminal, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/sessions/"+id+"/terminal", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", agentapi.ContentTypeJSON)
	hr.Header.Set("Connection", "Upgrade")
	hr.Header.Set("Upgrade", agentapi.TerminalProtocol)
	resp, err := c.httpClient().Do(hr)
	if err != nil {
		return nil, fmt.Errorf("nsbox daemon at %s: %w%s", c.socketName(), err, dialHint(err))
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		return nil, responseError(resp)
	}
	conn, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return nil, errors.New("nsbox daemon: the terminal's connection is not writable")
	}
	pid, _ := strconv.ParseUint(resp.Header.Get(agentapi.HeaderTerminalPid), 10, 32)
	return &Terminal{Pid: uint32(pid), conn: conn, br: bufio.NewReader(conn)}, nil
}

func (t *Terminal) write(typ byte, p []byte) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	return termframe.Write(t.conn, typ, p)
}

// Input sends what is typed (at most termframe.MaxPayload at once).
func (t *Terminal) Input(b []byte) error { return t.write(agentapi.FrameInput, b) }

// Resize sets the terminal's window size.
func (t *Terminal) Resize(rows, cols uint16) error {
	return t.write(agentapi.FrameResize, termframe.Size(rows, cols))
}

// Signal sends sig to the terminal's process group.
func (t *Terminal) Signal(sig int) error { return t.write(agentapi.FrameSignal, termframe.Signal(sig)) }

// Next returns the terminal's next output, or its exit (the last; then
// io.EOF), or why it ended early.
func (t *Terminal) Next() ([]byte, *agentapi.TerminalExit, error) {
	typ, p, err := termframe.Read(t.br)
	if err != nil {
		return nil, nil, err
	}
	switch typ {
	case agentapi.FrameOutput:
		return p, nil, nil
	case agentapi.FrameExit:
		var x agentapi.TerminalExit
		if err := json.Unmarshal(p, &x); err != nil {
			return nil, nil, fmt.Errorf("nsbox daemon: a terminal's exit: %w", err)
		}
		return nil, &x, nil
	case agentapi.FrameError:
		return nil, nil, fmt.Errorf("nsbox daemon: the terminal ended: %s", p)
	}
	return nil, nil, fmt.Errorf("nsbox daemon: a terminal frame of type %q", typ)
}

// Close ends the connection; the daemon then kills the terminal.
func (t *Terminal) Close() error { return t.conn.Close() }
