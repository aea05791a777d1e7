package envd

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/nsbox/nsbox/agentapi/e2b/envd/process"
	"github.com/nsbox/nsbox/agentapi/e2b/envd/process/processconnect"
)

// TestPty: envd's pty as the SDK's sandbox.pty drives it: Start with a
// pty, its output as pty data, SendInput's pty bytes typed at it, Update
// resizing it, and its exit code. (The agent runs on the host here, for
// the protocol alone; procs' tests run terminals in a sandbox.)
func TestPty(t *testing.T) {
	h := newHandler(t, &agentCore{a: hostAgent(t)})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sandboxKey{}, Sandbox{ID: "sb"})))
	}))
	t.Cleanup(srv.Close)
	c := processconnect.NewProcessClient(srv.Client(), srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	size := func(cols, rows uint32) *process.PTY {
		return &process.PTY{Size: &process.PTY_Size{Cols: cols, Rows: rows}}
	}
	start, err := c.Start(ctx, connect.NewRequest(&process.StartRequest{
		Process: &process.ProcessConfig{Cmd: "/bin/sh", Cwd: ptr(t.TempDir()), Envs: map[string]string{"PS1": "$ "}},
		Pty:     size(80, 24),
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !start.Receive() || start.Msg().GetEvent().GetStart() == nil {
		t.Fatalf("no start event: %v", start.Err())
	}
	pid := start.Msg().GetEvent().GetStart().GetPid()
	sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}

	if _, err := c.Update(ctx, connect.NewRequest(&process.UpdateRequest{Process: sel, Pty: size(100, 30)})); err != nil {
		t.Fatalf("Update: %v", err)
	}
	in := &process.ProcessInput{Input: &process.ProcessInput_Pty{Pty: []byte("stty size; exit 3\r")}}
	if _, err := c.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel, Input: in})); err != nil {
		t.Fatalf("SendInput: %v", err)
	}
	var out strings.Builder
	var end *process.ProcessEvent_EndEvent
	for start.Receive() {
		ev := start.Msg().GetEvent()
		if d := ev.GetData(); d != nil {
			if d.GetStdout() != nil || d.GetStderr() != nil {
				t.Errorf("a pty's output as stdout/stderr: %v", d)
			}
			out.Write(d.GetPty())
		}
		if e := ev.GetEnd(); e != nil {
			end = e
		}
	}
	if err := start.Err(); err != nil || end == nil {
		t.Fatalf("the stream ended with %v, end %v", err, end)
	}
	if !strings.Contains(out.String(), "30 100") || end.GetExitCode() != 3 {
		t.Errorf("output %q, end %v; want 30 100 and exit code 3", out.String(), end)
	}

	// A size of 0 and resizing a process without a pty are the caller's errors.
	bad, err := c.Start(ctx, connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "/bin/true"}, Pty: size(0, 24)}))
	if err == nil {
		for bad.Receive() {
		}
		err = bad.Err()
	}
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("Start with a 0-column pty: %v, want invalid_argument", err)
	}
	plain, err := c.Start(ctx, connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "sleep", Args: []string{"60"}, Cwd: ptr(t.TempDir())}}))
	if err != nil || !plain.Receive() {
		t.Fatalf("Start: %v %v", err, plain.Err())
	}
	psel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: plain.Msg().GetEvent().GetStart().GetPid()}}
	_, err = c.Update(ctx, connect.NewRequest(&process.UpdateRequest{Process: psel, Pty: size(10, 10)}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("Update of a process without a pty: %v, want invalid_argument", err)
	}
}
