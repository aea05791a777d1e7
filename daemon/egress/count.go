package egress

import (
	"fmt"
	"io"
	"net"
	"sync/atomic"
)

// A flow counts one record's bytes against the proxy's byte cap. Its
// counters are atomic because a tunnel's two directions are two goroutines.
type flow struct {
	p              *Proxy
	sent, received atomic.Int64
	capped         atomic.Bool
}

// add counts n bytes in one direction and fails once the proxy's total
// passes MaxBytes, which ends whichever connection moved them.
func (f *flow) add(n int, sent bool) error {
	if n <= 0 {
		return nil
	}
	if sent {
		f.sent.Add(int64(n))
	} else {
		f.received.Add(int64(n))
	}
	limit := f.p.policy.MaxBytes
	if total := f.p.bytes.Add(int64(n)); limit > 0 && total > limit {
		f.capped.Store(true)
		reason := fmt.Sprintf("byte cap of %d reached", limit)
		f.p.setCapped(reason)
		return fmt.Errorf("nsbox egress: %s", reason)
	}
	return nil
}

// done copies the counts into rec.
func (f *flow) done(rec *Record) {
	rec.Sent, rec.Received = f.sent.Load(), f.received.Load()
	if f.capped.Load() {
		rec.Reason = fmt.Sprintf("byte cap of %d reached", f.p.policy.MaxBytes)
	}
}

// countedConn is the sandbox's side of a tunnel: what it reads was sent
// by the sandbox, what it writes was received from upstream.
type countedConn struct {
	net.Conn
	f *flow
}

func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if cerr := c.f.add(n, true); cerr != nil {
		return n, cerr
	}
	return n, err
}

func (c *countedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if cerr := c.f.add(n, false); cerr != nil {
		return n, cerr
	}
	return n, err
}

// countedBody counts a plain request's or response's body.
type countedBody struct {
	io.ReadCloser
	f    *flow
	sent bool
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if cerr := b.f.add(n, b.sent); cerr != nil {
		return n, cerr
	}
	return n, err
}
