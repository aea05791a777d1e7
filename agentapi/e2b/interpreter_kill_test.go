package e2b

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// cellCore runs a cell that prints, then waits for its sandbox to be
// killed (kill: close it) and fails as the core's cell of a killed
// session does; alive: the cell fails with its sandbox still running.
type cellCore struct {
	*fakeCore
	started chan struct{}
	kill    chan struct{}
	alive   bool
}

func (c *cellCore) Exec(ctx context.Context, _ string, _ *agentapi.ExecRequest, opts daemon.RunOptions) (*agentapi.RunResult, error) {
	opts.OnStdout([]byte("working\n"))
	close(c.started)
	if c.alive {
		return nil, errdefs.New(errdefs.ErrUnavailable, "the interpreter failed")
	}
	select {
	case <-c.kill:
	case <-ctx.Done():
	}
	return nil, errdefs.New(errdefs.ErrSessionDead, "the session ended: deleted")
}

// TestCellCutWhenSandboxKilled: a runCode in flight when its sandbox is
// killed has its stream cut, as E2B's interpreter's is when the VM
// goes (the SDK then rejects with TimeoutError "The sandbox was killed
// while the request was in progress"), not ended with an error item,
// which would resolve runCode as a failed cell. A cell that fails in a
// running sandbox still ends with its error item.
func TestCellCutWhenSandboxKilled(t *testing.T) {
	for _, alive := range []bool{false, true} {
		name := "killed"
		if alive {
			name = "alive"
		}
		t.Run(name, func(t *testing.T) {
			keys, err := NewKeys([]string{keyA})
			if err != nil {
				t.Fatal(err)
			}
			core := &cellCore{fakeCore: newFakeCore(), started: make(chan struct{}), kill: make(chan struct{}), alive: alive}
			s, err := New(Config{Core: core, Keys: keys})
			if err != nil {
				t.Fatal(err)
			}
			sb := create(t, s, keyA, `{}`)
			srv := httptest.NewServer(s)
			t.Cleanup(srv.Close)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/execute", strings.NewReader(`{"code":"import time; time.sleep(300)"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("E2b-Sandbox-Id", sb.SandboxID)
			req.Header.Set("E2b-Sandbox-Port", "49999")
			req.Header.Set("E2B-Traffic-Access-Token", sb.TrafficAccessToken)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			if l, err := br.ReadString('\n'); err != nil || !strings.Contains(l, `"working\n"`) {
				t.Fatalf("first line %q, %v; want the cell's stdout", l, err)
			}
			<-core.started
			if !alive {
				if w := do(t, s, "DELETE", "/sandboxes/"+sb.SandboxID, "", map[string]string{"X-API-KEY": keyA}); w.Code != http.StatusNoContent {
					t.Fatalf("kill: %d %s", w.Code, w.Body)
				}
				close(core.kill)
			}
			rest, err := io.ReadAll(br)
			switch {
			case alive && (err != nil || !strings.Contains(string(rest), `"type":"error"`) || !strings.Contains(string(rest), "end_of_execution")):
				t.Fatalf("a failed cell in a running sandbox: %q, %v; want its error item and the end", rest, err)
			case !alive && !errors.Is(err, io.ErrUnexpectedEOF):
				t.Fatalf("after the kill: %q, %v; want the stream cut (unexpected EOF)", rest, err)
			case !alive && strings.Contains(string(rest), `"type":"error"`):
				t.Fatalf("an error item for a killed sandbox: %q", rest)
			}
		})
	}
}
