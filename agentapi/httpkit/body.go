package httpkit

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/nsbox/nsbox/daemon/errdefs"
)

// ErrBodyTimeout: the client did not send its body in time. It is of
// the class errdefs.ErrInvalidArgument, so that a table without a row of
// its own (E2B's) answers 400, not 500.
var ErrBodyTimeout = errdefs.New(errdefs.ErrInvalidArgument, "the request body did not arrive in time; send it at once (the connection is closed)")

// freeAfter is the body size after which the memory it took is handed
// back to the kernel as soon as the request is done: a daemon that took
// one 60 MiB body should not keep hundreds of MiB resident while idle.
const freeAfter = 8 << 20

// Bodies hands out request bodies within a server's Limits: each capped
// at MaxBodyBytes and due within BodyTimeout, and all of those held at
// once within MaxBodyBytesInFlight. One Bodies serves one listener.
type Bodies struct {
	lim       Limits
	mu        sync.Mutex
	used, max int64
}

// NewBodies returns the body budget of a server with limits l (zero
// fields take the defaults).
func NewBodies(l Limits) *Bodies {
	l = l.Or()
	return &Bodies{lim: l, max: l.MaxBodyBytesInFlight}
}

// Limits returns the limits b enforces, defaults filled in.
func (b *Bodies) Limits() Limits { return b.lim }

// InUse is the body bytes reserved now.
func (b *Bodies) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

func (b *Bodies) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max && b.used > 0 { // one body of any allowed size always fits
		return false
	}
	b.used += n
	return true
}

func (b *Bodies) give(n int64) {
	b.mu.Lock()
	b.used -= n
	idle := b.used == 0
	b.mu.Unlock()
	if idle && n >= freeAfter {
		debug.FreeOSMemory()
	}
}

// Hold returns r's body for reading into memory, capped at MaxBodyBytes
// and due within BodyTimeout, with its bytes reserved from the budget
// (its Content-Length, MaxBodyBytes when it has none) until release. A
// declared length above the cap is refused before a byte is read
// (*http.MaxBytesError, 413); a full budget is refused with
// errdefs.ErrExhausted (429). release gives the reservation back and
// clears the read deadline; call it once what was decoded is dropped.
func (b *Bodies) Hold(w http.ResponseWriter, r *http.Request) (_ io.Reader, release func(), _ error) {
	n := r.ContentLength
	if n > b.lim.MaxBodyBytes {
		w.Header().Set("Connection", "close")
		return nil, nil, &http.MaxBytesError{Limit: b.lim.MaxBodyBytes}
	}
	if n < 0 {
		n = b.lim.MaxBodyBytes
	}
	if !b.take(n) {
		return nil, nil, errdefs.New(errdefs.ErrExhausted, fmt.Sprintf(
			"request bodies in flight fill the daemon's %d MiB budget; retry shortly", b.max>>20))
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(b.lim.BodyTimeout))
	var once sync.Once
	return http.MaxBytesReader(w, r.Body, b.lim.MaxBodyBytes), func() {
		once.Do(func() {
			_ = rc.SetReadDeadline(time.Time{})
			b.give(n)
		})
	}, nil
}

// Stream returns r's body for a reader that never holds it whole (an
// upload copied to a file as it arrives): capped at max bytes, due within
// timeout, and reserving nothing from the budget, since it takes no more
// memory than a copy buffer. release clears the read deadline.
func Stream(w http.ResponseWriter, r *http.Request, max int64, timeout time.Duration) (_ io.Reader, release func(), _ error) {
	if r.ContentLength > max {
		w.Header().Set("Connection", "close")
		return nil, nil, &http.MaxBytesError{Limit: max}
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(timeout))
	return http.MaxBytesReader(w, r.Body, max), func() { _ = rc.SetReadDeadline(time.Time{}) }, nil
}

// BodyError translates a read that ran into the body deadline into
// ErrBodyTimeout, and closes the connection. The deadline is set again,
// in the past: after the handler, net/http reads what is left of a short
// body before it closes the connection, and with release's cleared
// deadline a client trickling its body held the connection open for as
// long as it trickled. Other errors are returned as they are.
func BodyError(w http.ResponseWriter, err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		return fmt.Errorf("%w: %v", ErrBodyTimeout, err)
	}
	return err
}
