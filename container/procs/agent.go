package procs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/container/internal/frame"
)

// SlowTimeout is how long the agent's reader waits for a subscriber whose
// buffer is full before it drops it. Meanwhile no event of any process is
// passed on, and the agent stops reading output once its own buffer is
// full: a flood waits for a slow reader, up to this long.
const SlowTimeout = 10 * time.Second

// maxFrame bounds one frame from the agent (32 KiB of output as base64, a
// file chunk of 256 KiB, a listing of up to 10,000 entries).
const maxFrame = 8 << 20

// Agent is the host's end of a sandbox's process agent. It is safe for
// concurrent use.
type Agent struct {
	conn *net.UnixConn
	pid  int
	slow time.Duration

	wmu sync.Mutex // one frame written at a time

	mu      sync.Mutex
	nextID  uint64
	calls   map[uint64]*call
	procs   map[uint32]*proc
	watches map[uint64]*Watch
	closed  bool
	readErr error
	done    chan struct{}
	outCap  int64 // LimitOutput

	quit     chan struct{} // closed by Close: stop waiting for subscribers
	quitOnce sync.Once
}

// call is a request waiting for its reply.
type call struct {
	start *Config  // a start: the process is registered at the reply
	sub   *Process // a start's subscription, made at the reply
	watch *Watch   // a watch's, registered at the reply
	rep   *message
	err   error
	done  chan struct{}
}

// proc is a running process and its subscribers.
type proc struct {
	info Info
	subs []*Process
	out  budget
}

// New returns an agent speaking over sock (its end of the socketpair whose
// other end the agent has); pid is the agent's pid in the sandbox. New
// takes sock over.
func New(sock *os.File, pid int) (*Agent, error) {
	c, err := net.FileConn(sock)
	sock.Close()
	if err != nil {
		return nil, fmt.Errorf("process agent socket: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("process agent socket: %T is not a Unix socket", c)
	}
	a := &Agent{conn: uc, pid: pid, slow: SlowTimeout, outCap: DefaultOutputBytes, calls: map[uint64]*call{}, procs: map[uint32]*proc{}, watches: map[uint64]*Watch{}, done: make(chan struct{}), quit: make(chan struct{})}
	go a.read()
	return a, nil
}

// Pid is the agent's pid in the sandbox.
func (a *Agent) Pid() int { return a.pid }

// Done is closed once the agent is gone.
func (a *Agent) Done() <-chan struct{} { return a.done }

// Close ends the agent: it kills the process groups it started and exits.
// Subscriptions end with ErrClosed.
func (a *Agent) Close() error {
	a.quitOnce.Do(func() { close(a.quit) })
	err := a.conn.Close()
	<-a.done
	return err
}

// Start starts a process and returns a subscription to its events from
// the first (Start{Pid}); it returns once the process runs, or with
// ErrStart (the command or working directory not found, not executable).
// When ctx ends first the process may still start; it runs on.
func (a *Agent) Start(ctx context.Context, cfg Config) (*Process, error) {
	if cfg.Cmd == "" {
		return nil, fmt.Errorf("%w: no command", ErrStart)
	}
	c := &call{start: &cfg}
	if cfg.Pty != nil && (cfg.Pty.Rows == 0 || cfg.Pty.Cols == 0) {
		return nil, fmt.Errorf("%w: a terminal of %dx%d", ErrStart, cfg.Pty.Cols, cfg.Pty.Rows)
	}
	rep, err := a.call(ctx, request{Op: "start", Cmd: cfg.Cmd, Args: cfg.Args, Env: cfg.Env, Cwd: cfg.Cwd, Stdin: cfg.Stdin, Pty: cfg.Pty}, c)
	if err != nil {
		return nil, err
	}
	if rep.Error != "" {
		return nil, fmt.Errorf("%w: %s", ErrStart, rep.Error)
	}
	return c.sub, nil
}

// Connect subscribes to a running process's events from now on (the first
// is Start{Pid}).
func (a *Agent) Connect(ctx context.Context, sel Selector) (*Process, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, a.closedErr()
	}
	p := a.find(sel)
	if p == nil {
		return nil, fmt.Errorf("%s: %w", sel, ErrNotFound)
	}
	sub := newProcess(p.info.Pid)
	p.subs = append(p.subs, sub)
	return sub, nil
}

// List describes the running processes, by pid.
func (a *Agent) List() []Info {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Info, 0, len(a.procs))
	for _, p := range a.procs {
		out = append(out, p.info)
	}
	slices.SortFunc(out, func(x, y Info) int { return int(x.Pid) - int(y.Pid) })
	return out
}

// inputChunk bounds the data of one input frame (the agent takes frames
// of up to 16 MiB, base64 included).
const inputChunk = 1 << 20

// SendInput writes data to the process's stdin; it returns once the
// process's pipe took it all (a process that does not read holds it up).
func (a *Agent) SendInput(ctx context.Context, sel Selector, data []byte) error {
	for {
		n := min(len(data), inputChunk)
		if err := a.op(ctx, sel, request{Op: "input", Data: data[:n]}); err != nil {
			return err
		}
		if data = data[n:]; len(data) == 0 {
			return nil
		}
	}
}

// CloseStdin closes the process's stdin, after what SendInput wrote.
func (a *Agent) CloseStdin(ctx context.Context, sel Selector) error {
	return a.op(ctx, sel, request{Op: "close_stdin"})
}

// Signal sends sig to the process's group: the process and what it
// started (unless they made groups of their own). A terminal's (Pty)
// goes to its whole session too: the jobs its shell put in groups of
// their own.
func (a *Agent) Signal(ctx context.Context, sel Selector, sig syscall.Signal) error {
	return a.op(ctx, sel, request{Op: "signal", Signal: int(sig)})
}

func (a *Agent) op(ctx context.Context, sel Selector, req request) error {
	a.mu.Lock()
	p := a.find(sel)
	a.mu.Unlock()
	if p == nil {
		return fmt.Errorf("%s: %w", sel, ErrNotFound)
	}
	req.Pid = p.info.Pid
	rep, err := a.call(ctx, req, &call{})
	if err != nil {
		return err
	}
	switch {
	case rep.Error == "":
		return nil
	case rep.Kind == "not_found":
		return fmt.Errorf("%s: %w", sel, ErrNotFound)
	case rep.Kind == "stdin":
		return fmt.Errorf("%s: %w", sel, ErrStdin)
	case rep.Kind == "pty":
		return fmt.Errorf("%s: %w: %s", sel, ErrNotPty, rep.Error)
	default:
		return fmt.Errorf("%s: %s", sel, rep.Error)
	}
}

// find returns the running process sel names, or nil; a.mu is held.
func (a *Agent) find(sel Selector) *proc {
	if sel.Pid != 0 {
		return a.procs[sel.Pid]
	}
	if sel.Tag == "" {
		return nil
	}
	var found *proc
	for _, p := range a.procs {
		if p.info.Tag == sel.Tag && (found == nil || p.info.Pid < found.info.Pid) {
			found = p
		}
	}
	return found
}

func (a *Agent) closedErr() error {
	if a.readErr != nil {
		return fmt.Errorf("%w (%v)", ErrClosed, a.readErr)
	}
	return ErrClosed
}

// call sends req and waits for its reply. ctx bounds the wait; a reply
// that comes later is dropped (a start's process is registered all the
// same).
func (a *Agent) call(ctx context.Context, req request, c *call) (*message, error) {
	c.done = make(chan struct{})
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil, a.closedErr()
	}
	a.nextID++
	req.ID = a.nextID
	a.calls[req.ID] = c
	a.mu.Unlock()
	b, err := frame.Append(nil, req)
	if err == nil {
		a.wmu.Lock()
		if dl, ok := ctx.Deadline(); ok {
			_ = a.conn.SetWriteDeadline(dl)
		}
		_, err = a.conn.Write(b)
		_ = a.conn.SetWriteDeadline(time.Time{})
		a.wmu.Unlock()
	}
	if err != nil {
		a.mu.Lock()
		delete(a.calls, req.ID)
		a.mu.Unlock()
		if errors.Is(err, net.ErrClosed) {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("process agent: %w", err)
	}
	select {
	case <-c.done:
		return c.rep, c.err
	case <-ctx.Done():
		a.mu.Lock()
		delete(a.calls, req.ID)
		sub := c.sub // the reply may have come meanwhile
		a.mu.Unlock()
		if sub != nil {
			sub.Close() // nobody will read it
		}
		return nil, ctx.Err()
	}
}

// read passes the agent's frames on until the socket ends.
func (a *Agent) read() {
	err := a.loop()
	a.mu.Lock()
	a.closed, a.readErr = true, err
	calls, procs, watches := a.calls, a.procs, a.watches
	a.calls, a.procs, a.watches = map[uint64]*call{}, map[uint32]*proc{}, map[uint64]*Watch{}
	a.mu.Unlock()
	for _, w := range watches {
		w.end(ErrClosed)
	}
	for _, c := range calls {
		c.err = a.closedErr()
		close(c.done)
	}
	for _, p := range procs {
		for _, s := range p.subs {
			s.finish(ErrClosed)
		}
	}
	close(a.done)
}

func (a *Agent) loop() error {
	for {
		b, err := frame.Read(a.conn, maxFrame)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		var m message
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("%w: %v", ErrProtocol, err)
		}
		if m.ID != nil {
			a.reply(&m)
			continue
		}
		a.event(&m)
	}
}

// reply completes a call; a start's process is registered here, before
// any of its events (the agent sends them after the reply).
func (a *Agent) reply(m *message) {
	a.mu.Lock()
	c := a.calls[*m.ID]
	delete(a.calls, *m.ID)
	if c != nil && c.start != nil && m.Error == "" && m.Pid != 0 {
		c.sub = newProcess(m.Pid)
		a.procs[m.Pid] = &proc{info: Info{Pid: m.Pid, Tag: c.start.Tag, Config: *c.start}, subs: []*Process{c.sub}, out: budget{cap: a.outCap}}
	}
	if c != nil && c.watch != nil && m.Error == "" && m.Wid != 0 {
		c.watch.wid = m.Wid
		a.watches[m.Wid] = c.watch
	}
	a.mu.Unlock()
	if c == nil {
		if wid := m.Wid; wid != 0 && m.Error == "" { // a watch whose caller is gone
			go func() { _ = a.unwatch(wid) }()
		}
		return
	}
	c.rep = m
	close(c.done)
}

// event passes a process's event to its subscribers.
func (a *Agent) event(m *message) {
	if m.Wid != 0 {
		a.watchEvent(m)
		return
	}
	var ev Event
	switch {
	case m.End:
		ev.End = newEnd(m)
	case m.Out != nil:
		ev.Data = &Data{Stdout: m.Out}
	case m.Err != nil:
		ev.Data = &Data{Stderr: m.Err}
	case m.Pty != nil:
		ev.Data = &Data{Pty: m.Pty}
	default:
		return
	}
	a.mu.Lock()
	p := a.procs[m.Pid]
	if p != nil && m.End {
		delete(a.procs, m.Pid)
	}
	var subs []*Process
	var passed bool
	if p != nil {
		subs = slices.Clone(p.subs)
		switch {
		case ev.Data != nil && ev.Data.Stdout != nil:
			ev.Data.Stdout, passed = p.out.take(0, ev.Data.Stdout)
		case ev.Data != nil && ev.Data.Pty != nil:
			ev.Data.Pty, passed = p.out.take(0, ev.Data.Pty)
		case ev.Data != nil:
			ev.Data.Stderr, passed = p.out.take(1, ev.Data.Stderr)
		case p.out.over != "":
			ev.End = p.out.end()
		}
	}
	a.mu.Unlock()
	if passed {
		go a.kill(m.Pid)
	}
	if ev.Data != nil && len(ev.Data.Stdout)+len(ev.Data.Stderr)+len(ev.Data.Pty) == 0 {
		return // past the cap
	}
	var gone []*Process
	for _, s := range subs {
		if !a.deliver(s, ev) {
			gone = append(gone, s)
		} else if m.End {
			s.finish(nil)
		}
	}
	if len(gone) > 0 && !m.End {
		a.mu.Lock()
		p.subs = slices.DeleteFunc(p.subs, func(s *Process) bool { return slices.Contains(gone, s) })
		a.mu.Unlock()
	}
}

// deliver passes ev to s, waiting up to a.slow for room; a subscriber
// that closed or fell behind is finished and false returned.
func (a *Agent) deliver(s *Process, ev Event) bool {
	select {
	case <-s.quit:
		s.finish(nil)
		return false
	default:
	}
	select {
	case s.ch <- ev:
		return true
	default:
	}
	t := time.NewTimer(a.slow)
	defer t.Stop()
	select {
	case s.ch <- ev:
		return true
	case <-s.quit:
		s.finish(nil)
	case <-t.C:
		s.finish(ErrSlow)
	case <-a.quit:
		s.finish(ErrClosed)
	}
	return false
}
