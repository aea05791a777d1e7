// Package client is the Go client of the nsbox daemon's API (package
// agentapi) over its Unix socket. The zero Client talks to
// agentapi.DefaultSocket.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/errdefs/errhttp"
)

// Client talks to one nsbox daemon. The zero value is usable; a Client is
// safe for concurrent use and must not be copied after first use.
type Client struct {
	// Socket is the daemon's Unix socket; empty means agentapi.DefaultSocket.
	Socket string
	// HTTPClient, when set, is used as is (its transport must reach the
	// daemon; requests go to http://nsbox/...).
	HTTPClient *http.Client

	once sync.Once
	hc   *http.Client
}

func (c *Client) httpClient() *http.Client {
	c.once.Do(func() {
		if c.HTTPClient != nil {
			c.hc = c.HTTPClient
			return
		}
		sock := c.Socket
		if sock == "" {
			sock = agentapi.DefaultSocket
		}
		var d net.Dialer
		c.hc = &http.Client{
			Transport: &http.Transport{
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					return d.DialContext(ctx, "unix", sock)
				},
				MaxIdleConnsPerHost: 16,
				IdleConnTimeout:     30 * time.Second,
			},
			// The API never redirects; the mux's path-cleaning redirects
			// (for "a/../b", "//x") must surface as errors, not be followed
			// with a Referer that the daemon then refuses.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	})
	return c.hc
}

const baseURL = "http://nsbox/" + agentapi.Version

// Health checks that the daemon answers.
func (c *Client) Health(ctx context.Context) (*agentapi.Health, error) {
	var h agentapi.Health
	if err := c.get(ctx, "/health", &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// Info returns the daemon's version, limits, rootfs list and concurrency.
func (c *Client) Info(ctx context.Context) (*agentapi.Info, error) {
	var in agentapi.Info
	if err := c.get(ctx, "/info", &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// Run runs req and returns its result. A run that ends badly (non-zero
// exit, timeout, …) is a result, not an error; errors are transport
// failures and *agentapi.Error from the daemon.
func (c *Client) Run(ctx context.Context, req *agentapi.RunRequest) (*agentapi.RunResult, error) {
	resp, err := c.postRun(ctx, req, agentapi.ContentTypeJSON)
	if err != nil {
		return nil, err
	}
	defer closeBody(resp.Body)
	var res agentapi.RunResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return nil, fmt.Errorf("nsbox daemon: decoding run result: %w", err)
	}
	return &res, nil
}

// RunStream runs req and calls onEvent (when non-nil) for every stream event
// as it arrives — start, stdout and stderr chunks, then the result — and
// returns the result. Cancelling ctx disconnects, which kills the run.
func (c *Client) RunStream(ctx context.Context, req *agentapi.RunRequest, onEvent func(agentapi.Event)) (*agentapi.RunResult, error) {
	resp, err := c.postRun(ctx, req, agentapi.ContentTypeNDJSON)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return readStream(resp.Body, onEvent)
}

func (c *Client) postRun(ctx context.Context, req *agentapi.RunRequest, accept string) (*http.Response, error) {
	return c.post(ctx, "/runs", req, accept)
}

// post sends v as JSON to path, asking for accept, and returns a 2xx
// response (others become *agentapi.Error).
func (c *Client) post(ctx context.Context, path string, v any, accept string) (*http.Response, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding the request for %s: %w", path, err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", agentapi.ContentTypeJSON)
	hr.Header.Set("Accept", accept)
	return c.do(hr)
}

func (c *Client) get(ctx context.Context, p string, v any) error {
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+p, nil)
	if err != nil {
		return err
	}
	resp, err := c.do(hr)
	if err != nil {
		return err
	}
	defer closeBody(resp.Body)
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("nsbox daemon: decoding %s: %w", p, err)
	}
	return nil
}

// closeBody reads what a JSON decoder left of an answer (its last
// newline, a chunked body's end) and closes it: net/http's transport
// reuses a connection only for a body read to its end, and without this
// every run took a new connection, which a daemon short of connection
// slots may close before it has read the request.
func closeBody(body io.ReadCloser) {
	io.Copy(io.Discard, io.LimitReader(body, 4<<10))
	body.Close()
}

// do sends hr and turns non-2xx answers into *agentapi.Error.
func (c *Client) do(hr *http.Request) (*http.Response, error) {
	resp, err := c.httpClient().Do(hr)
	if err != nil {
		return nil, fmt.Errorf("nsbox daemon at %s: %w%s", c.socketName(), err, dialHint(err))
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, responseError(resp)
}

func (c *Client) socketName() string {
	if c.HTTPClient != nil {
		return "(custom transport)"
	}
	if c.Socket == "" {
		return agentapi.DefaultSocket
	}
	return c.Socket
}

func responseError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var body agentapi.ErrorBody
	ae := &agentapi.Error{Status: resp.StatusCode}
	if err := json.Unmarshal(data, &body); err == nil && body.Error != nil {
		ae.Code, ae.Message = body.Error.Code, body.Error.Message
	} else {
		ae.Code, ae.Message = agentapi.CodeInternal, fmt.Sprintf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(data))
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		ae.RetryAfter = time.Duration(s) * time.Second
	}
	return classed(ae)
}

// classed sets ae's class from its code, for errors.Is on the client side
// (errors.Is(err, errdefs.ErrSessionDead)), and returns it.
func classed(ae *agentapi.Error) *agentapi.Error {
	if ae != nil {
		ae.Class = errhttp.FromCode(ae.Code)
	}
	return ae
}
