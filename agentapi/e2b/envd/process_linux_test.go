package envd

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/agentapi/e2b/envd/process"
	"github.com/nsbox/nsbox/agentapi/e2b/envd/process/processconnect"
	"github.com/nsbox/nsbox/container/procs"
)

// agentCore serves one process agent (every session's).
type agentCore struct {
	Core
	a *procs.Agent
}

func (c *agentCore) Processes(context.Context, string) (*procs.Agent, error) { return c.a, nil }

// hostAgent starts the process agent (procs.AgentSource) as the runner
// does, but on the host, for the handlers' protocol alone; it and what
// it started end at cleanup.
func hostAgent(t *testing.T) *procs.Agent {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skipf("the process agent needs python3: %v", err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "agent"), os.NewFile(uintptr(fds[1]), "agent")
	cmd := exec.Command(python, "-I", "-S", "-c", "FD = 3\n"+procs.AgentSource)
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	theirs.Close()
	a, err := procs.New(ours, cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, p := range a.List() {
			_ = a.Signal(context.Background(), procs.Selector{Pid: p.Pid}, unix.SIGKILL)
		}
		a.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return a
}

// TestStreamDeadline: a process stream that outlives its request's
// Connect-Timeout-Ms ends with deadline_exceeded (the SDKs' TimeoutError),
// never cleanly without an end event; the process runs on, and a Connect
// to it is cut off the same way.
func TestStreamDeadline(t *testing.T) {
	srv := newServer(t, &agentCore{a: hostAgent(t)})
	c := processconnect.NewProcessClient(srv.Client(), srv.URL)

	// The timeout is the server's alone (the header, as the SDK sends it,
	// and no deadline on the client's side, which would end the stream
	// with the same code by itself). Each stream is read to its end: the
	// verdict is how it ends, whatever the machine's speed. A start on a busy machine can take longer than the timeout (the
	// agent is a fresh python3): then the stream still ends
	// deadline_exceeded, with no start event, and is tried again with
	// twice the timeout until one starts in time.
	ctx := context.Background()
	var pid uint32
	for timeout := 300 * time.Millisecond; pid == 0; timeout *= 2 {
		if timeout > time.Minute {
			t.Fatal("no start event within a minute's Connect-Timeout-Ms")
		}
		sreq := connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "sleep", Args: []string{"60"}, Cwd: ptr(t.TempDir())}})
		sreq.Header().Set("Connect-Timeout-Ms", strconv.FormatInt(timeout.Milliseconds(), 10))
		start, err := c.Start(ctx, sreq)
		if err != nil {
			t.Fatal(err)
		}
		for start.Receive() {
			ev := start.Msg().GetEvent()
			if s := ev.GetStart(); s != nil {
				pid = s.GetPid()
			}
			if ev.GetEnd() != nil {
				t.Fatalf("an end event for a command still running: %v", ev)
			}
		}
		if err := start.Err(); connect.CodeOf(err) != connect.CodeDeadlineExceeded {
			t.Fatalf("Start's stream (Connect-Timeout-Ms %v) ended with %v (code %v), want deadline_exceeded", timeout, err, connect.CodeOf(err))
		}
	}

	creq := connect.NewRequest(&process.ConnectRequest{Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}})
	creq.Header().Set("Connect-Timeout-Ms", "300")
	conn, err := c.Connect(ctx, creq)
	if err != nil {
		t.Fatal(err)
	}
	for conn.Receive() {
		if conn.Msg().GetEvent().GetEnd() != nil {
			t.Fatalf("an end event for a command still running: %v", conn.Msg())
		}
	}
	if err := conn.Err(); connect.CodeOf(err) != connect.CodeDeadlineExceeded {
		t.Fatalf("Connect's stream ended with %v (code %v), want deadline_exceeded (the process runs on: it was found)", err, connect.CodeOf(err))
	}
	if ce := (*connect.Error)(nil); !errors.As(conn.Err(), &ce) {
		t.Fatalf("%v is not a *connect.Error", conn.Err())
	}
}

func ptr[T any](v T) *T { return &v }

// TestCommandOutputCap: issue 35's `head -c 200M /dev/zero` through
// envd's process stream gets the cap's bytes, then an end event whose
// status is output_limit, the runs' verdict, with an error the SDKs raise
// (CommandExitError).
func TestCommandOutputCap(t *testing.T) {
	a := hostAgent(t)
	const limit = 1 << 20
	a.LimitOutput(limit)
	srv := newServer(t, &agentCore{a: a})
	c := processconnect.NewProcessClient(srv.Client(), srv.URL)
	start, err := c.Start(context.Background(), connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "head", Args: []string{"-c", "200M", "/dev/zero"}, Cwd: ptr(t.TempDir())}}))
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var end *process.ProcessEvent_EndEvent
	for start.Receive() {
		ev := start.Msg().GetEvent()
		n += len(ev.GetData().GetStdout())
		if e := ev.GetEnd(); e != nil {
			end = e
		}
	}
	if err := start.Err(); err != nil || end == nil {
		t.Fatalf("the stream ended with %v, end event %v", err, end)
	}
	if n != limit || end.GetStatus() != procs.StatusOutputLimit || end.GetError() == "" || end.GetExited() {
		t.Fatalf("%d bytes, end %v; want %d bytes and status %s", n, end, limit, procs.StatusOutputLimit)
	}
}

// TestStreamCutWhenSandboxEnds: a command's stream in flight when its
// sandbox ends (the agent closes) is cut, as E2B's is when the sandbox's
// VM goes: no end of stream, no Connect error of the server's (which the
// SDKs would raise as that error; a cut they check against the sandbox's
// health and raise as "killed or reached its end of life").
func TestStreamCutWhenSandboxEnds(t *testing.T) {
	a := hostAgent(t)
	srv := newServer(t, &agentCore{a: a})
	c := processconnect.NewProcessClient(srv.Client(), srv.URL)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start, err := c.Start(ctx, connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "sleep", Args: []string{"60"}, Cwd: ptr(t.TempDir())}}))
	if err != nil {
		t.Fatal(err)
	}
	if !start.Receive() || start.Msg().GetEvent().GetStart() == nil {
		t.Fatalf("no start event: %v", start.Err())
	}
	pid := int(start.Msg().GetEvent().GetStart().GetPid())
	t.Cleanup(func() { _ = unix.Kill(pid, unix.SIGKILL) })
	a.Close() // the sandbox ends
	for start.Receive() {
		if start.Msg().GetEvent().GetEnd() != nil {
			t.Fatalf("an end event from a sandbox that ended: %v", start.Msg())
		}
	}
	err = start.Err()
	if err == nil {
		t.Fatal("the stream ended cleanly")
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("the stream ended with %v (code %v), want it cut (unexpected EOF), not an error of the server's", err, connect.CodeOf(err))
	}
}
