package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/daemon"
)

// bigAnswers is a core whose session execs and file reads answer big.
type bigAnswers struct {
	Core
	big string
}

func (c bigAnswers) Exec(_ context.Context, id string, _ *agentapi.ExecRequest, opts daemon.RunOptions) (*agentapi.RunResult, error) {
	out := &agentapi.RunResult{ID: id, Status: "ok", Stdout: c.big}
	opts.OnResult(out)
	return out, nil
}

func (c bigAnswers) ReadFile(context.Context, string, string, int64) ([]byte, error) {
	return []byte(c.big), nil
}

// A client that asks for a big answer and never reads it is cut off at
// the write deadline: the handler returns (freeing the result and, for a
// run, its slot) and the connection is closed, for a JSON run answer, a
// stream, a session exec and a file download alike.
func TestNeverReadingClientIsCutOff(t *testing.T) {
	// Ten times what a Unix socket's buffers hold, so the write blocks;
	// the deadline is then 100 ms plus 2 s for the 2 MiB (MinReadRate).
	big := strings.Repeat("y", 2<<20)
	runner := &fakeRunner{fn: func(_ context.Context, spec container.Spec) (*container.Result, error) {
		return &container.Result{ID: spec.ID, Status: container.StatusOK, Stdout: []byte(big), StdoutBytes: int64(len(big))}, nil
	}}
	ts := startServer(t, runner, func(c *testConfig) {
		c.WriteTimeout = 100 * time.Millisecond
		c.WrapCore = func(core Core) Core { return bigAnswers{Core: core, big: big} }
	})
	const run = `{"argv":["yes"]}`
	for _, tc := range []struct {
		name, method, path, accept, body string
	}{
		{"run", "POST", "/v1/runs", "", run},
		{"run stream", "POST", "/v1/runs", agentapi.ContentTypeNDJSON, run},
		{"session exec", "POST", "/v1/sessions/s1/exec", "", `{"code":"print(1)"}`},
		{"file download", "GET", "/v1/sessions/s1/files/big.txt", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := rawConn(t, ts)
			_ = c.SetDeadline(time.Now().Add(time.Minute))
			logged := fmt.Sprintf(`"msg":"request","method":%q,"path":%q`, tc.method, tc.path)
			before := strings.Count(ts.logs.String(), logged)
			req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: nsbox\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", tc.method, tc.path, len(tc.body))
			if tc.accept != "" {
				req += "Accept: " + tc.accept + "\r\n"
			}
			if _, err := io.WriteString(c, req+"\r\n"+tc.body); err != nil {
				t.Fatal(err)
			}
			// Never read until the handler has returned (the middleware's
			// log line); without a write deadline it never does.
			for deadline := time.Now().Add(time.Minute); strings.Count(ts.logs.String(), logged) == before; {
				if time.Now().After(deadline) {
					t.Fatalf("the handler of a client that does not read was still writing after a minute")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if n := ts.core.InFlight(); n != 0 {
				t.Errorf("%d runs still hold a slot", n)
			}
			// What reached the socket's buffers, then the end: the daemon
			// closed the connection (a read that times out fails here).
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("reading the head of the answer: %v", err)
			}
			got, err := io.Copy(io.Discard, resp.Body)
			if ne, ok := err.(interface{ Timeout() bool }); ok && ne.Timeout() {
				t.Fatalf("the connection stayed open after the write deadline (%d bytes read)", got)
			}
			if got >= int64(len(big)) {
				t.Errorf("%d bytes read: the whole answer, want it cut off", got)
			}
		})
	}
}
