package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// writeRecorder is a core that records the session files written.
type writeRecorder struct {
	Core
	mu    sync.Mutex
	paths []string
}

func (c *writeRecorder) WriteFile(_ context.Context, _, path string, _ []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paths = append(c.paths, path)
	return nil
}

func (c *writeRecorder) written() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.paths...)
}

// TestBrokenUploadsAreTheClients: a file upload whose body is not whole by
// the client's doing (a malformed chunked encoding, a body cut short by a
// half-closed or a closed connection) is answered 400 invalid_argument
// (or not at all, to a client that left), never 500, and writes no file.
func TestBrokenUploadsAreTheClients(t *testing.T) {
	rec := &writeRecorder{}
	ts := startServer(t, nil, func(c *testConfig) { c.WrapCore = func(core Core) Core { rec.Core = core; return rec } })
	head := func(path, framing string) string {
		return fmt.Sprintf("PUT /v1/sessions/s1/files/%s HTTP/1.1\r\nHost: nsbox\r\n%s\r\n\r\n", path, framing)
	}
	for _, tc := range []struct {
		name, req string
	}{
		{"a bad chunk size", head("bad-size.txt", "Transfer-Encoding: chunked") + "zz\r\nhello\r\n0\r\n\r\n"},
		{"a chunk without its CRLF", head("bad-crlf.txt", "Transfer-Encoding: chunked") + "5\r\nhelloXX3\r\nabc\r\n0\r\n\r\n"},
		{"a chunked body cut short", head("cut-chunked.txt", "Transfer-Encoding: chunked") + "a\r\nhel"},
		{"a body shorter than its length", head("cut-length.txt", "Content-Length: 100") + "hello"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := rawConn(t, ts)
			if _, err := c.Write([]byte(tc.req)); err != nil {
				t.Fatal(err)
			}
			// The client has sent all it will: the rest never comes.
			if err := c.(*net.UnixConn).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			resp, body := readStatus(t, c)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `"code":"invalid_argument"`) {
				t.Errorf("status %d %s, want 400 invalid_argument", resp.StatusCode, body)
			}
		})
	}

	// A client that leaves mid-upload: nothing to answer, nothing written,
	// and the request is logged as the client's (400), not as a 500.
	c := rawConn(t, ts)
	if _, err := c.Write([]byte(head("gone.txt", "Content-Length: 1000") + "part of it")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	logged := `"path":"/v1/sessions/s1/files/gone.txt"`
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(ts.logs.String(), logged); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the gone client's request was never logged:\n%s", ts.logs)
		}
	}
	for _, line := range strings.Split(ts.logs.String(), "\n") {
		if strings.Contains(line, "/files/") && (strings.Contains(line, `"status":500`) || strings.Contains(line, `"code":"internal"`)) {
			t.Errorf("a broken upload answered as the daemon's failure: %s", line)
		}
	}
	if w := rec.written(); len(w) > 0 {
		t.Errorf("broken uploads wrote %q", w)
	}
}
