package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nsbox/nsbox/agentapi"
)

// DialPort opens a raw TCP tunnel to 127.0.0.1:port in session id's
// sandbox, through the daemon's socket (GET
// /v1/sessions/{id}/ports/{port} with Upgrade: tcp): what is written to
// the connection reaches the server there, and CloseWrite passes on the
// end of it. It needs the Socket (not a custom HTTPClient).
func (c *Client) DialPort(ctx context.Context, id string, port int) (net.Conn, error) {
	if c.HTTPClient != nil {
		return nil, errors.New("nsbox client: DialPort needs the daemon's Socket, not a custom HTTPClient")
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", c.socketName())
	if err != nil {
		return nil, fmt.Errorf("nsbox daemon at %s: %w%s", c.socketName(), err, dialHint(err))
	}
	uc := nc.(*net.UnixConn)
	if dl, ok := ctx.Deadline(); ok {
		_ = uc.SetDeadline(dl)
	}
	path := "/" + agentapi.Version + "/sessions/" + id + "/ports/" + strconv.Itoa(port)
	req := "GET " + path + " HTTP/1.1\r\nHost: nsbox\r\nConnection: Upgrade\r\nUpgrade: " + agentapi.UpgradeTCP + "\r\n\r\n"
	br := bufio.NewReader(uc)
	var resp *http.Response
	if _, err = io.WriteString(uc, req); err == nil {
		resp, err = http.ReadResponse(br, nil)
	}
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("nsbox daemon at %s: port %d of session %s: %w", c.socketName(), port, id, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || !strings.EqualFold(resp.Header.Get("Upgrade"), agentapi.UpgradeTCP) {
		defer uc.Close()
		return nil, responseError(resp)
	}
	_ = uc.SetDeadline(time.Time{})
	return &tunnel{UnixConn: uc, r: br}, nil
}

// tunnel reads what the daemon sent after its 101 from the reader that
// read the 101.
type tunnel struct {
	*net.UnixConn
	r *bufio.Reader
}

func (t *tunnel) Read(p []byte) (int, error) { return t.r.Read(p) }
