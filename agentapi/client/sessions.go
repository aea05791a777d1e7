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
	"net/url"
	"strings"

	"github.com/nsbox/nsbox/agentapi"
)

// CreateSession starts a session and returns it once its interpreter is
// ready.
func (c *Client) CreateSession(ctx context.Context, req *agentapi.SessionRequest) (*agentapi.Session, error) {
	var s agentapi.Session
	if err := c.doJSON(ctx, http.MethodPost, "/sessions", req, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Sessions lists the daemon's sessions.
func (c *Client) Sessions(ctx context.Context) ([]agentapi.Session, error) {
	var l agentapi.SessionList
	if err := c.get(ctx, "/sessions", &l); err != nil {
		return nil, err
	}
	return l.Sessions, nil
}

// Session describes one session (state "dead" with the reason when it died).
func (c *Client) Session(ctx context.Context, id string) (*agentapi.Session, error) {
	var s agentapi.Session
	if err := c.get(ctx, "/sessions/"+url.PathEscape(id), &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// DeleteSession ends a session.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodDelete, "/sessions/"+url.PathEscape(id), nil, nil)
}

// PauseSession freezes a session (memory kept, no CPU) until
// ResumeSession or its next exec.
func (c *Client) PauseSession(ctx context.Context, id string) (*agentapi.Session, error) {
	var s agentapi.Session
	if err := c.doJSON(ctx, http.MethodPost, "/sessions/"+url.PathEscape(id)+"/pause", nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ResumeSession thaws a paused session.
func (c *Client) ResumeSession(ctx context.Context, id string) (*agentapi.Session, error) {
	var s agentapi.Session
	if err := c.doJSON(ctx, http.MethodPost, "/sessions/"+url.PathEscape(id)+"/resume", nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ForkSession makes count branches of a session (0: one), each with its
// Python state and a copy of its workspace, and says per branch what was
// not carried.
func (c *Client) ForkSession(ctx context.Context, id string, count int) (*agentapi.ForkResult, error) {
	req := agentapi.ForkRequest{}
	if count != 0 {
		req.Count = &count
	}
	var out agentapi.ForkResult
	if err := c.doJSON(ctx, http.MethodPost, "/sessions/"+url.PathEscape(id)+"/fork", &req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ParkSession writes a session to the daemon's disk and ends its sandbox;
// its next exec, or ReviveSession, revives it.
func (c *Client) ParkSession(ctx context.Context, id string) (*agentapi.Session, error) {
	var s agentapi.Session
	if err := c.doJSON(ctx, http.MethodPost, "/sessions/"+url.PathEscape(id)+"/park", nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ReviveSession brings a parked session back and says what was not
// carried.
func (c *Client) ReviveSession(ctx context.Context, id string) (*agentapi.CarriedSession, error) {
	var s agentapi.CarriedSession
	if err := c.doJSON(ctx, http.MethodPost, "/sessions/"+url.PathEscape(id)+"/revive", nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Exec runs code in a session. An exception, a timeout or the session's
// death is a result, not an error.
func (c *Client) Exec(ctx context.Context, id string, req *agentapi.ExecRequest) (*agentapi.RunResult, error) {
	var res agentapi.RunResult
	if err := c.doJSON(ctx, http.MethodPost, "/sessions/"+url.PathEscape(id)+"/exec", req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ExecStream runs code in a session and calls onEvent for every stream
// event as it arrives, then returns the result. Cancelling ctx interrupts
// the cell (KeyboardInterrupt); the session survives.
func (c *Client) ExecStream(ctx context.Context, id string, req *agentapi.ExecRequest, onEvent func(agentapi.Event)) (*agentapi.RunResult, error) {
	resp, err := c.post(ctx, "/sessions/"+url.PathEscape(id)+"/exec", req, agentapi.ContentTypeNDJSON)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return readStream(resp.Body, onEvent)
}

// readStream reads events up to the result (or error) event.
func readStream(r io.Reader, onEvent func(agentapi.Event)) (*agentapi.RunResult, error) {
	dec := json.NewDecoder(bufio.NewReader(r))
	for {
		var ev agentapi.Event
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("nsbox daemon: stream ended before its result: %w", err)
		}
		if onEvent != nil {
			onEvent(ev)
		}
		switch ev.Type {
		case agentapi.EventResult:
			if ev.Result == nil {
				return nil, errors.New("nsbox daemon: result event without a result")
			}
			return ev.Result, nil
		case agentapi.EventError:
			if ev.Error == nil {
				return nil, errors.New("nsbox daemon: error event without an error")
			}
			return nil, classed(ev.Error)
		}
	}
}

// filePath escapes a workspace path for a URL, keeping its slashes.
func filePath(id, p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return baseURL + "/sessions/" + url.PathEscape(id) + "/files/" + strings.Join(parts, "/")
}

// PutFile writes data to path (relative to /workspace) in a session.
func (c *Client) PutFile(ctx context.Context, id, path string, data io.Reader) error {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPut, filePath(id, path), data)
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Type", "application/octet-stream")
	resp, err := c.do(hr)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// GetFile reads a file of a session's /workspace.
func (c *Client) GetFile(ctx context.Context, id, path string) ([]byte, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, filePath(id, path), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// DeleteFile removes a file from a session's /workspace.
func (c *Client) DeleteFile(ctx context.Context, id, path string) error {
	hr, err := http.NewRequestWithContext(ctx, http.MethodDelete, filePath(id, path), nil)
	if err != nil {
		return err
	}
	resp, err := c.do(hr)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// ListFiles lists a session's /workspace (FileList says whether the list
// was cut at its cap).
func (c *Client) ListFiles(ctx context.Context, id string) ([]agentapi.WorkspaceFile, error) {
	l, err := c.FileList(ctx, id)
	if err != nil {
		return nil, err
	}
	return l.Files, nil
}

// FileList lists a session's /workspace, with FilesTruncated set when the
// list stops at its cap.
func (c *Client) FileList(ctx context.Context, id string) (*agentapi.FileList, error) {
	var l agentapi.FileList
	if err := c.get(ctx, "/sessions/"+url.PathEscape(id)+"/files", &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// doJSON sends body (nil: none) as JSON and decodes the answer into out
// (nil: discarded).
func (c *Client) doJSON(ctx context.Context, method, p string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	hr, err := http.NewRequestWithContext(ctx, method, baseURL+p, rd)
	if err != nil {
		return err
	}
	if body != nil {
		hr.Header.Set("Content-Type", agentapi.ContentTypeJSON)
	}
	resp, err := c.do(hr)
	if err != nil {
		return err
	}
	defer closeBody(resp.Body)
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("nsbox daemon: decoding %s %s: %w", method, p, err)
	}
	return nil
}
