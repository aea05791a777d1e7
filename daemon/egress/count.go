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

// take counts n bytes that have arrived in one direction against
// MaxBytes and says how many of them fit: n, or fewer and an error once
// they would pass the cap. The caller delivers only the bytes that fit,
// so no more than MaxBytes ever moves, to the byte. Both directions
// share the budget, so the check and the count are one atomic step; and
// since bytes are counted once they have arrived, never while awaited,
// an idle direction holds no share of it.
func (f *flow) take(n int, sent bool) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	got := int64(n)
	if limit := f.p.policy.MaxBytes; limit > 0 {
		for {
			used := f.p.bytes.Load()
			got = min(int64(n), max(limit-used, 0))
			if f.p.bytes.CompareAndSwap(used, used+got) {
				break
			}
		}
	} else {
		f.p.bytes.Add(got)
	}
	if sent {
		f.sent.Add(got)
	} else {
		f.received.Add(got)
	}
	if got < int64(n) {
		f.capped.Store(true)
		reason := fmt.Sprintf("byte cap of %d reached", f.p.policy.MaxBytes)
		f.p.setCapped(reason)
		return int(got), fmt.Errorf("nsbox egress: %s", reason)
	}
	return n, nil
}

// done copies the counts into rec.
func (f *flow) done(rec *Record) {
	rec.Sent, rec.Received = f.sent.Load(), f.received.Load()
	if f.capped.Load() {
		rec.Reason = fmt.Sprintf("byte cap of %d reached", f.p.policy.MaxBytes)
	}
}

// countedConn is the sandbox's side of a terminated tunnel: what it reads
// was sent by the sandbox, what it writes was received from upstream.
type countedConn struct {
	net.Conn
	f *flow
}

func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if got, cerr := c.f.take(n, true); cerr != nil {
		return got, cerr
	}
	return n, err
}

func (c *countedConn) Write(b []byte) (int, error) {
	got, cerr := c.f.take(len(b), false)
	n, err := c.Conn.Write(b[:got])
	if cerr != nil {
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
	if got, cerr := b.f.take(n, b.sent); cerr != nil {
		return got, cerr
	}
	return n, err
}
