package envd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/nsbox/nsbox/agentapi/e2b/envd/process"
	"github.com/nsbox/nsbox/agentapi/e2b/envd/process/processconnect"
	"github.com/nsbox/nsbox/container/procs"
)

// processService is envd's process.Process over the session's process
// agent: commands run in the sandbox beside its interpreter, as its user,
// each in a process group of its own, and end with the sandbox.
type processService struct {
	processconnect.UnimplementedProcessHandler
	s *server
}

var _ processconnect.ProcessHandler = (*processService)(nil)

func (ps *processService) agent(ctx context.Context) (*procs.Agent, error) {
	a, err := ps.s.core.Processes(ctx, ps.s.id(ctx))
	return a, connectError(err)
}

func selector(sel *process.ProcessSelector) (procs.Selector, error) {
	switch {
	case sel == nil:
		return procs.Selector{}, connect.NewError(connect.CodeInvalidArgument, errors.New("process: a pid or a tag is required"))
	case sel.GetTag() != "":
		return procs.Selector{Tag: sel.GetTag()}, nil
	}
	return procs.Selector{Pid: sel.GetPid()}, nil
}

// keepalive is the interval the SDK asks for (Keepalive-Ping-Interval,
// seconds); a stream sends an empty event that often so that proxies and
// the SDK's idle timers see it alive.
func keepalive(h interface{ Get(string) string }) time.Duration {
	if n, err := strconv.Atoi(h.Get("Keepalive-Ping-Interval")); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 50 * time.Second
}

// pump sends a process's events to the client until its end event or
// the client goes. The process is not killed when the client goes: it
// runs on (background commands keep no stream open), and ends with
// SendSignal or the sandbox. A stream whose context ends first (the
// request's Connect-Timeout-Ms passed, or the client left) ends with
// its Connect error, never cleanly: a clean end without an end event is
// the SDKs' "Process exited without a result", where a deadline must be
// their TimeoutError.
func pump(ctx context.Context, sub *procs.Process, every time.Duration, send func(*process.ProcessEvent) error) error {
	err := pumpEvents(ctx, sub, every, send)
	if err != nil && ctx.Err() != nil {
		// However the end reached it first (the subscription closed, a
		// send refused), a stream whose context ended says why.
		return streamEnded(ctx.Err())
	}
	return err
}

func pumpEvents(ctx context.Context, sub *procs.Process, every time.Duration, send func(*process.ProcessEvent) error) error {
	defer sub.Close()
	tick := time.NewTicker(every)
	defer tick.Stop()
	events := sub.Events()
	for {
		select {
		case <-ctx.Done():
			return streamEnded(ctx.Err())
		case <-tick.C:
			if err := send(&process.ProcessEvent{Event: &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
		case ev, ok := <-events:
			if !ok {
				if errors.Is(sub.Err(), procs.ErrClosed) {
					abortStream()
				}
				return connectError(sub.Err())
			}
			pe := wireEvent(ev)
			if pe == nil {
				continue
			}
			if err := send(pe); err != nil {
				return err
			}
			if ev.End != nil {
				return nil
			}
		}
	}
}

// abortStream cuts the response's connection mid-stream: the agent
// closed because the sandbox ended (killed, its timeout, a pause, the
// daemon's stop), and a stream in flight then ends as E2B's does when its
// sandbox's VM goes: cut, with no end of stream. The SDKs read that cut
// (fetch's "terminated") as the connection dropped, probe the sandbox's
// health (502 once it is gone) and raise TimeoutError "The sandbox was
// killed or reached its end of life"; an error sent in the stream
// instead would read as the error it names. http.ErrAbortHandler is
// net/http's way, and it logs nothing.
func abortStream() {
	panic(http.ErrAbortHandler)
}

// startError is the Connect error of a Start or Connect that failed
// before its stream began: one whose request's context ended on the way
// (Connect-Timeout-Ms passed while the agent started the command on a
// busy machine) says so as pump does, never internal.
func startError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return streamEnded(ctx.Err())
	}
	return connectError(err)
}

// streamEnded is the Connect error of a stream whose context ended
// (err: its ctx.Err()): deadline_exceeded past Connect-Timeout-Ms, as
// E2B's envd ends it, else canceled.
func streamEnded(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return connect.NewError(connect.CodeDeadlineExceeded, errors.New("the request's timeout passed; the process runs on (connect to it again, or kill it)"))
	}
	return connect.NewError(connect.CodeCanceled, err)
}

func wireEvent(ev procs.Event) *process.ProcessEvent {
	switch {
	case ev.Start != nil:
		return &process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: ev.Start.Pid}}}
	case ev.Data != nil && ev.Data.Stdout != nil:
		return &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stdout{Stdout: ev.Data.Stdout}}}}
	case ev.Data != nil && ev.Data.Pty != nil:
		return &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Pty{Pty: ev.Data.Pty}}}}
	case ev.Data != nil && ev.Data.Stderr != nil:
		return &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stderr{Stderr: ev.Data.Stderr}}}}
	case ev.End != nil:
		end := &process.ProcessEvent_EndEvent{ExitCode: ev.End.ExitCode, Exited: ev.End.Exited, Status: ev.End.Status}
		if ev.End.Error != "" {
			end.Error = &ev.End.Error
		}
		return &process.ProcessEvent{Event: &process.ProcessEvent_End{End: end}}
	}
	return nil
}

func (ps *processService) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	cfg := req.Msg.GetProcess()
	if cfg == nil || cfg.GetCmd() == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd is required"))
	}
	a, err := ps.agent(ctx)
	if err != nil {
		return err
	}
	pc := procs.Config{
		Cmd: cfg.GetCmd(), Args: cfg.GetArgs(), Env: cfg.GetEnvs(), Cwd: cfg.GetCwd(), Stdin: req.Msg.GetStdin(), Tag: req.Msg.GetTag(),
	}
	if req.Msg.Pty != nil {
		size, err := ptySize(req.Msg.GetPty())
		if err != nil {
			return err
		}
		pc.Pty = &size
	}
	sub, err := a.Start(ctx, pc)
	if err != nil {
		return startError(ctx, err)
	}
	return pump(ctx, sub, keepalive(req.Header()), func(ev *process.ProcessEvent) error {
		return stream.Send(&process.StartResponse{Event: ev})
	})
}

func (ps *processService) Connect(ctx context.Context, req *connect.Request[process.ConnectRequest], stream *connect.ServerStream[process.ConnectResponse]) error {
	sel, err := selector(req.Msg.GetProcess())
	if err != nil {
		return err
	}
	a, err := ps.agent(ctx)
	if err != nil {
		return err
	}
	sub, err := a.Connect(ctx, sel)
	if err != nil {
		return startError(ctx, err)
	}
	return pump(ctx, sub, keepalive(req.Header()), func(ev *process.ProcessEvent) error {
		return stream.Send(&process.ConnectResponse{Event: ev})
	})
}

func (ps *processService) List(ctx context.Context, _ *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	a, err := ps.agent(ctx)
	if err != nil {
		return nil, err
	}
	out := &process.ListResponse{}
	for _, p := range a.List() {
		pi := &process.ProcessInfo{Pid: p.Pid, Config: &process.ProcessConfig{Cmd: p.Config.Cmd, Args: p.Config.Args, Envs: p.Config.Env}}
		if p.Config.Cwd != "" {
			cwd := p.Config.Cwd
			pi.Config.Cwd = &cwd
		}
		if p.Tag != "" {
			tag := p.Tag
			pi.Tag = &tag
		}
		out.Processes = append(out.Processes, pi)
	}
	return connect.NewResponse(out), nil
}

func (ps *processService) SendInput(ctx context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	if err := ps.input(ctx, req.Msg.GetProcess(), req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.SendInputResponse{}), nil
}

func (ps *processService) input(ctx context.Context, psel *process.ProcessSelector, in *process.ProcessInput) error {
	sel, err := selector(psel)
	if err != nil {
		return err
	}
	a, err := ps.agent(ctx)
	if err != nil {
		return err
	}
	// A terminal's input (pty) is what is typed at it: the agent writes
	// it to the terminal's master, as a process's stdin to its pipe.
	data := in.GetStdin()
	if _, ok := in.GetInput().(*process.ProcessInput_Pty); ok {
		data = in.GetPty()
	}
	return connectError(a.SendInput(ctx, sel, data))
}

func (ps *processService) StreamInput(ctx context.Context, stream *connect.ClientStream[process.StreamInputRequest]) (*connect.Response[process.StreamInputResponse], error) {
	var sel *process.ProcessSelector
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *process.StreamInputRequest_Start:
			sel = ev.Start.GetProcess()
		case *process.StreamInputRequest_Data:
			if err := ps.input(ctx, sel, ev.Data.GetInput()); err != nil {
				return nil, err
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.StreamInputResponse{}), nil
}

func (ps *processService) SendSignal(ctx context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	sel, err := selector(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	var sig syscall.Signal
	switch req.Msg.GetSignal() {
	case process.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	case process.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("signal: SIGTERM or SIGKILL"))
	}
	a, err := ps.agent(ctx)
	if err != nil {
		return nil, err
	}
	if err := a.Signal(ctx, sel, sig); err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

func (ps *processService) CloseStdin(ctx context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	sel, err := selector(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	a, err := ps.agent(ctx)
	if err != nil {
		return nil, err
	}
	if err := a.CloseStdin(ctx, sel); err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&process.CloseStdinResponse{}), nil
}

// Update resizes a process's terminal (the only thing envd's Update
// changes); a request without a pty changes nothing, as envd's.
func (ps *processService) Update(ctx context.Context, req *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	sel, err := selector(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	a, err := ps.agent(ctx)
	if err != nil {
		return nil, err
	}
	if req.Msg.Pty != nil {
		size, err := ptySize(req.Msg.GetPty())
		if err != nil {
			return nil, err
		}
		if err := a.Resize(ctx, sel, size); err != nil {
			return nil, connectError(err)
		}
	}
	return connect.NewResponse(&process.UpdateResponse{}), nil
}

// ptySize is a request's terminal size, each side 1 to 65535.
func ptySize(p *process.PTY) (procs.Size, error) {
	r, c := p.GetSize().GetRows(), p.GetSize().GetCols()
	if r == 0 || c == 0 || r > 0xffff || c > 0xffff {
		return procs.Size{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("pty.size: %d cols and %d rows; each must be 1 to 65535", c, r))
	}
	return procs.Size{Rows: uint16(r), Cols: uint16(c)}, nil
}
