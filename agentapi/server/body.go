package server

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

// ErrBodyTimeout: the client did not send its body in time.
var ErrBodyTimeout = errors.New("the request body did not arrive in time; send it at once (the connection is closed)")

// freeAfter is the body size after which the memory it took is handed
// back to the kernel as soon as the request is done: a daemon that took
// one 60 MiB body should not keep hundreds of MiB resident while idle.
const freeAfter = 8 << 20

// bodyBudget bounds the request-body bytes the server holds at once: a
// request reserves its Content-Length (MaxBodyBytes when it has none)
// before its body is read, and gives it back when it is answered, since
// what was decoded lives that long.
type bodyBudget struct {
	mu        sync.Mutex
	used, max int64
}

func (b *bodyBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max && b.used > 0 { // one body of any allowed size always fits
		return false
	}
	b.used += n
	return true
}

func (b *bodyBudget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	idle := b.used == 0
	b.mu.Unlock()
	if idle && n >= freeAfter {
		debug.FreeOSMemory()
	}
}

// body returns r's body for reading, capped at MaxBodyBytes and due
// within BodyTimeout, with its bytes reserved from the body budget. A
// declared length above the cap is refused before a byte is read (413);
// a full budget is refused with 429. release gives the reservation back
// and clears the read deadline.
func (s *Server) body(w http.ResponseWriter, r *http.Request) (_ io.Reader, release func(), _ error) {
	n := r.ContentLength
	if n > s.cfg.MaxBodyBytes {
		w.Header().Set("Connection", "close")
		return nil, nil, &http.MaxBytesError{Limit: s.cfg.MaxBodyBytes}
	}
	if n < 0 {
		n = s.cfg.MaxBodyBytes
	}
	if !s.bodies.take(n) {
		return nil, nil, errdefs.New(errdefs.ErrExhausted, fmt.Sprintf(
			"request bodies in flight fill the daemon's %d MiB budget; retry shortly", s.cfg.MaxBodyBytesInFlight>>20))
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
	var once sync.Once
	return http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes), func() {
		once.Do(func() {
			_ = rc.SetReadDeadline(time.Time{})
			s.bodies.give(n)
		})
	}, nil
}

// bodyError translates a read that ran into the body deadline. The
// deadline is set again, in the past: after the handler, net/http reads
// what is left of a short body before it closes the connection, and with
// release's cleared deadline a client trickling its body held the
// connection open for as long as it trickled.
func bodyError(w http.ResponseWriter, err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		return fmt.Errorf("%w: %v", ErrBodyTimeout, err)
	}
	return err
}
