// Package ports reaches the servers a session's sandbox runs on its own
// loopback, from the daemon: a connection to 127.0.0.1:PORT opened inside
// the sandbox's network namespace, one per request (dial_linux.go), and
// the book of them per session: how many, the bytes each way, and their
// end when the sandbox ends. Nothing listens for them on the host: the
// transports (/v1's port routes, E2B's PORT-ID hosts, `nsbox session
// port`) ask the core for a connection after checking who asks, and the
// sandbox's network stays cut off from the host's.
package ports

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nsbox/nsbox/daemon/errdefs"
)

// ErrNoListener: nothing listens on the port in the sandbox (the
// transports answer 502, naming the port).
var ErrNoListener = errors.New("nothing listens on it in the sandbox")

// ErrEnded: the sandbox ended before the connection was made (the
// session is dead).
var ErrEnded = errdefs.New(errdefs.ErrSessionDead, "the sandbox ended")

// dialTimeout bounds a connection a sandbox does not accept (a frozen
// one, or one whose backlog is full); loopback answers at once otherwise.
const dialTimeout = 10 * time.Second

// Target is the sandbox a connection goes to.
type Target struct {
	Pid  int             // a process of the sandbox (its init), for its network namespace
	Done <-chan struct{} // closed when the sandbox has ended
}

// Stats are a session's port connections so far.
type Stats struct {
	Connections int64 // made
	Open        int64 // open now
	Sent        int64 // bytes to the sandbox's servers
	Received    int64 // bytes from them
}

// Book keeps the port connections of every session: counts, and the open
// ones, closed when their sandbox ends. OnConn and OnBytes, when set, are
// the metrics' hooks.
type Book struct {
	OnConn  func()
	OnBytes func(sent, received int64)

	mu   sync.Mutex
	sess map[string]*entry
}

type entry struct {
	done                        <-chan struct{}
	conns, open, sent, received atomic.Int64
	mu                          sync.Mutex
	live                        map[*conn]struct{}
}

// Dial connects to 127.0.0.1:port in t's sandbox for session id, whose
// caller the core has already checked. The connection is counted in id's
// Stats until it closes; the sandbox's end closes it.
func (b *Book) Dial(ctx context.Context, id string, t Target, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, errdefs.Field("port", "%d is not a TCP port (1 to 65535)", port)
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", t.Pid))
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", id, ErrEnded)
	}
	defer ns.Close()
	// The namespace is held from here; if the sandbox had not ended when
	// it was opened, its pid was its own (its init is not reaped before
	// Done), never a reused one in another namespace.
	select {
	case <-t.Done:
		return nil, fmt.Errorf("session %s: %w", id, ErrEnded)
	default:
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	nc, err := dialIn(ctx, ns, port)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	e := b.entry(id, t.Done)
	c := &conn{Conn: nc, e: e, b: b}
	e.mu.Lock()
	select {
	case <-t.Done:
		e.mu.Unlock()
		nc.Close()
		return nil, fmt.Errorf("session %s: %w", id, ErrEnded)
	default:
	}
	e.live[c] = struct{}{}
	e.mu.Unlock()
	e.conns.Add(1)
	e.open.Add(1)
	if b.OnConn != nil {
		b.OnConn()
	}
	return c, nil
}

// entry returns id's entry for the sandbox that ends with done, making
// it (and the watcher that closes its connections at that end).
func (b *Book) entry(id string, done <-chan struct{}) *entry {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sess == nil {
		b.sess = map[string]*entry{}
	}
	if e, ok := b.sess[id]; ok && e.done == done {
		return e
	}
	e := &entry{done: done, live: map[*conn]struct{}{}}
	b.sess[id] = e
	go func() {
		<-done
		b.mu.Lock()
		if b.sess[id] == e {
			delete(b.sess, id)
		}
		b.mu.Unlock()
		e.mu.Lock()
		for c := range e.live {
			c.Conn.Close()
		}
		e.mu.Unlock()
	}()
	return e
}

// Stats are id's port connections so far; false when it has had none in
// its present sandbox.
func (b *Book) Stats(id string) (Stats, bool) {
	b.mu.Lock()
	e, ok := b.sess[id]
	b.mu.Unlock()
	if !ok {
		return Stats{}, false
	}
	return Stats{Connections: e.conns.Load(), Open: e.open.Load(), Sent: e.sent.Load(), Received: e.received.Load()}, true
}

// conn is a counted connection to a sandbox's port.
type conn struct {
	net.Conn
	e    *entry
	b    *Book
	once sync.Once
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.e.received.Add(int64(n))
		if c.b.OnBytes != nil {
			c.b.OnBytes(0, int64(n))
		}
	}
	return n, err
}

func (c *conn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.e.sent.Add(int64(n))
		if c.b.OnBytes != nil {
			c.b.OnBytes(int64(n), 0)
		}
	}
	return n, err
}

// CloseWrite half-closes the connection (a tunnel passes on its client's
// end of input).
func (c *conn) CloseWrite() error {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		return tc.CloseWrite()
	}
	return nil
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.e.mu.Lock()
		delete(c.e.live, c)
		c.e.mu.Unlock()
		c.e.open.Add(-1)
	})
	return err
}
