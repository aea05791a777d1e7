package zyproto

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container/internal/frame"
)

// ErrDead reports a zygote that has died or been closed.
var ErrDead = errors.New("the zygote is gone")

// Child is a forked child as a Conn reports on it.
type Child interface {
	// Forked gives the child's pid in the zygote's namespace, before Fork
	// returns and before any exit report of it.
	Forked(zpid int)
	// Exited reports the child's exit (SIGKILL when the zygote died).
	Exited(ws syscall.WaitStatus)
}

// Conn is the engine's end of a running zygote's control socket: it sends
// fork requests one at a time and dispatches the zygote's frames (Serve):
// replies to the fork in flight, exit reports to the child they name.
type Conn struct {
	sock   *os.File
	forkMu sync.Mutex // one fork request at a time

	mu       sync.Mutex
	children map[int]Child // by pid in the zygote's pid namespace
	pending  Child         // the fork in flight
	replies  chan Reply    // replies to fork requests
	dead     chan struct{} // closed when the zygote is gone
}

// NewConn serves the zygote on sock once it is ready.
func NewConn(sock *os.File) *Conn {
	return &Conn{sock: sock, children: map[int]Child{}, replies: make(chan Reply, 1), dead: make(chan struct{})}
}

// Dead is closed when the zygote is gone (Serve has returned).
func (c *Conn) Dead() <-chan struct{} { return c.dead }

// Fork sends one fork request, with files (the child's ends of its socket
// and pipes, and its workspace) attached, and waits for the zygote's
// answer.
func (c *Conn) Fork(req Request, files []*os.File, child Child) error {
	msg, err := frame.Append(nil, req)
	if err != nil {
		return err
	}

	c.forkMu.Lock()
	defer c.forkMu.Unlock()
	c.setPending(child)
	defer c.setPending(nil)
	select {
	case <-c.dead:
		return ErrDead
	default:
	}
	if err := frame.SendFiles(c.sock, msg, files...); err != nil {
		return fmt.Errorf("fork request: %w", err)
	}
	select {
	case r := <-c.replies:
		if r.Error != "" {
			return fmt.Errorf("zygote: %s", r.Error)
		}
		if r.Forked == nil {
			return fmt.Errorf("zygote: unexpected reply %+v", r)
		}
		return nil
	case <-c.dead:
		return ErrDead
	}
}

func (c *Conn) setPending(child Child) {
	c.mu.Lock()
	c.pending = child
	c.mu.Unlock()
}

// Kill asks the zygote to SIGKILL a child of its own that never got far
// enough for the engine to hold it by pidfd or cgroup.
func (c *Conn) Kill(zpid int) {
	c.forkMu.Lock()
	defer c.forkMu.Unlock()
	_ = frame.Write(c.sock, map[string]int{"kill": zpid})
}

// Serve dispatches the zygote's frames until it ends, then marks it dead:
// its children died with it. The error is nil at a clean EOF.
func (c *Conn) Serve() error {
	defer c.died()
	for {
		var r Reply
		if err := ReadFrame(c.sock, &r); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		switch {
		case r.Exit != nil:
			c.mu.Lock()
			child := c.children[*r.Exit]
			delete(c.children, *r.Exit)
			c.mu.Unlock()
			if child != nil {
				child.Exited(syscall.WaitStatus(r.Status))
			}
		case r.Forked != nil:
			c.mu.Lock()
			if child := c.pending; child != nil {
				child.Forked(*r.Forked)
				c.children[*r.Forked] = child
			}
			c.mu.Unlock()
			c.replies <- r
		default:
			c.replies <- r
		}
	}
}

func (c *Conn) died() {
	close(c.dead)
	c.mu.Lock()
	children := c.children
	c.children = map[int]Child{}
	c.mu.Unlock()
	for _, child := range children {
		child.Exited(syscall.WaitStatus(unix.SIGKILL))
	}
}
