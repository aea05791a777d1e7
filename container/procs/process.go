package procs

import (
	"context"
	"fmt"
	"io"
	"sync"
	"syscall"
)

// Config describes a process to start.
type Config struct {
	Cmd  string   // the program, looked up in PATH when it has no slash
	Args []string // its arguments (argv is Cmd then Args)
	// Env is added to the sandbox's environment.
	Env map[string]string
	// Cwd is the working directory ("": /home/user when the sandbox has
	// it, else /workspace).
	Cwd string
	// Stdin opens a pipe to the process's stdin (SendInput, CloseStdin);
	// without it stdin is /dev/null.
	Stdin bool
	// Pty starts the process on a terminal of this size, allocated in the
	// sandbox (its own devpts): stdin, stdout and stderr are the
	// terminal, which is its controlling tty; its output comes as
	// Data.Pty, SendInput writes what is typed, Resize changes the size.
	// Stdin is then ignored.
	Pty *Size
	// Tag names the process for Connect and List (need not be unique:
	// a Selector by tag takes the first running one).
	Tag string
}

// Size is a terminal's window size, in characters.
type Size struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// Info describes a running process.
type Info struct {
	Pid    uint32
	Tag    string
	Config Config
}

// Selector picks a running process: by Pid when it is not 0, else by Tag.
type Selector struct {
	Pid uint32
	Tag string
}

func (s Selector) String() string {
	if s.Pid != 0 {
		return fmt.Sprintf("pid %d", s.Pid)
	}
	return fmt.Sprintf("tag %q", s.Tag)
}

// Event is one event of a process: exactly one field is set.
type Event struct {
	Start *Start
	Data  *Data
	End   *End
}

// Start is the first event of every subscription.
type Start struct{ Pid uint32 }

// Data is output, as it arrived: one of Stdout, Stderr and Pty (a
// terminal's output: Config.Pty) is set.
type Data struct{ Stdout, Stderr, Pty []byte }

// End is the process's end, the last event.
type End struct {
	// ExitCode is the exit status, -1 when a signal ended the process.
	ExitCode int32
	// Exited: the process exited (false: a signal ended it, Signal).
	Exited bool
	Signal syscall.Signal
	// Status is "exit status N" or "signal: NAME" (as Go's
	// os.ProcessState says it, and E2B's envd).
	Status string
	// Error is "" for exit status 0, else Status.
	Error string
}

func newEnd(m *message) *End {
	if m.Signal != 0 {
		st := "signal: " + syscall.Signal(m.Signal).String()
		return &End{ExitCode: -1, Signal: syscall.Signal(m.Signal), Status: st, Error: st}
	}
	e := &End{ExitCode: m.Code, Exited: true, Status: fmt.Sprintf("exit status %d", m.Code)}
	if m.Code != 0 {
		e.Error = e.Status
	}
	return e
}

// subBuffer is how many events a subscription holds unread.
const subBuffer = 64

// Process is a subscription to one process's events, from Start or
// Connect. Read them with Events or Next (not both); Close ends the
// subscription (not the process).
type Process struct {
	Pid uint32

	ch   chan Event    // closed by the agent's reader once err is set
	quit chan struct{} // closed by Close
	once sync.Once
	err  error
}

func newProcess(pid uint32) *Process {
	p := &Process{Pid: pid, ch: make(chan Event, subBuffer), quit: make(chan struct{})}
	p.ch <- Event{Start: &Start{Pid: pid}}
	return p
}

// Events is the subscription's events; it is closed after End, or when
// the subscription ends early (Err says why).
func (p *Process) Events() <-chan Event { return p.ch }

// Err says why Events was closed: nil after End, ErrSlow, ErrClosed.
// Valid once Events is closed.
func (p *Process) Err() error { return p.err }

// Next returns the next event; io.EOF after End, or the subscription's
// error (ErrSlow, ErrClosed), or ctx's.
func (p *Process) Next(ctx context.Context) (Event, error) {
	select {
	case ev, ok := <-p.ch:
		if ok {
			return ev, nil
		}
		if p.err != nil {
			return Event{}, p.err
		}
		return Event{}, io.EOF
	case <-ctx.Done():
		return Event{}, ctx.Err()
	}
}

// Close ends the subscription; the process goes on.
func (p *Process) Close() { p.once.Do(func() { close(p.quit) }) }

// finish closes the channel; only the agent's reader calls it, once.
func (p *Process) finish(err error) {
	p.err = err
	close(p.ch)
}

// Signal is a signal to send (syscall.Signal); the usual two are here.
type Signal = syscall.Signal

// Signals E2B sends.
const (
	SIGTERM = syscall.SIGTERM
	SIGKILL = syscall.SIGKILL
)
