package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/nsbox/nsbox/agentapi"
)

// Watch streams the changes in dir, a directory of the session's
// /workspace ("" the workspace itself), to onEvent, the "start" line
// first (GET /v1/sessions/{id}/watch). It returns nil when the directory
// goes ("end"), the session's error when it ends, and ctx's when ctx
// ends first. The session needs its process agent
// (SessionRequest.Processes).
func (c *Client) Watch(ctx context.Context, id, dir string, recursive bool, onEvent func(agentapi.WatchEvent)) error {
	q := url.Values{"path": {dir}}
	if recursive {
		q.Set("recursive", "1")
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/sessions/"+url.PathEscape(id)+"/watch?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	hr.Header.Set("Accept", agentapi.ContentTypeNDJSON)
	resp, err := c.do(hr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(bufio.NewReader(resp.Body))
	for {
		var ev agentapi.WatchEvent
		if err := dec.Decode(&ev); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("nsbox daemon: watch stream ended before its end: %w", err)
		}
		if onEvent != nil && ev.Type != agentapi.WatchError {
			onEvent(ev)
		}
		switch ev.Type {
		case agentapi.WatchEnd:
			return nil
		case agentapi.WatchError:
			if ev.Error == nil {
				return errors.New("nsbox daemon: error line without an error")
			}
			return classed(ev.Error)
		}
	}
}
