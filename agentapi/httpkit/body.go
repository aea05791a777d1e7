package httpkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/errdefs/errhttp"
)

// ErrBodyTimeout: the client did not send its body in time (408, Status).
// It is of the class errdefs.ErrInvalidArgument, so that a caller that
// does not ask Status still answers 400, not 500.
var ErrBodyTimeout = errdefs.New(errdefs.ErrInvalidArgument, "the request body did not arrive in time; send it at once (the connection is closed)")

// ErrBodyBroken: the request body could not be read to its end, by the
// client's doing (a malformed chunked encoding, a connection closed or
// reset mid-body). Of class errdefs.ErrInvalidArgument: 400, and the
// connection is closed; a client that left gets no answer at all.
var ErrBodyBroken = errdefs.New(errdefs.ErrInvalidArgument, "the request body was cut off or malformed (a bad chunked encoding, or the connection closed mid-body); send it again, whole")

// clientBody is a request body whose read errors are the client's:
// anything but its end and the read deadline (BodyError's) becomes
// ErrBodyBroken, so that it is never answered as the daemon's failure.
type clientBody struct{ r io.Reader }

func (b clientBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	var ne net.Error
	if err == nil || err == io.EOF || errors.As(err, &ne) && ne.Timeout() {
		return n, err
	}
	return n, fmt.Errorf("%w: %v", ErrBodyBroken, err)
}

// freeAfter is the body size after which the memory it took is handed
// back to the kernel once the request is done: a daemon that took one
// 60 MiB body should not keep hundreds of MiB resident while idle.
const freeAfter = 8 << 20

// Bodies hands out request bodies within a server's Limits: each capped
// at MaxBodyBytes and due within BodyTimeout, and all of those held at
// once within MaxBodyBytesInFlight. One Bodies serves one listener.
type Bodies struct {
	lim       Limits
	mu        sync.Mutex
	used, max int64
	// pending counts the requests with a big body or answer (FreeAfter)
	// whose handler has not returned yet.
	pending int
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

func (b *Bodies) take(n int64) bool { return b.takeBeside(n, 0) }

// takeBeside reserves n more bytes for a body that holds own already.
func (b *Bodies) takeBeside(n, own int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max && b.used > own { // one body of any allowed size always fits
		return false
	}
	b.used += n
	return true
}

func (b *Bodies) give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// FreeAfter hands the heap back to the kernel once r's handler has
// returned, unless another request FreeAfter was called for is still in
// its handler: then that one's return does it. Call it for a request that
// held a big body or answer (a release of a body of freeAfter bytes or
// more calls it itself).
//
// What a big request leaves is garbage only after its handler returns (a
// handler keeps what it decoded: E2B's release their body in a defer),
// and what an idle daemon does not collect stays resident: it allocates
// too little to start a collection, and the runtime's scavenger returns
// only what a collection freed. A hand-back inside the handler left the
// body's 60 MiB in the heap for good (86 MiB resident after the E2B body
// scenario, against 28 when it came last). net/http cancels a request's
// context when its handler returns (or when its client goes away; the
// handler ends soon after), so the hand-back follows it.
func (b *Bodies) FreeAfter(r *http.Request) {
	b.mu.Lock()
	b.pending++
	b.mu.Unlock()
	context.AfterFunc(r.Context(), func() {
		b.mu.Lock()
		b.pending--
		last := b.pending == 0
		b.mu.Unlock()
		if last {
			freeOSMemory()
		}
	})
}

// freeOSMemory collects twice, then hands the free heap back to the
// kernel. Twice because encoding/json keeps the buffer of every value it
// marshals in a sync.Pool, whatever its size, and a pool's contents
// survive one collection (its victim cache): the 60 MiB buffer of a code
// cell marshalled for its runner (container/internal/frame) or of an E2B
// record was still live after debug.FreeOSMemory alone (gctrace: 61 MB
// live after the forced collection, 86 MiB resident while idle).
func freeOSMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}

// Hold returns r's body for reading into memory, capped at MaxBodyBytes
// and due within BodyTimeout, with its bytes reserved from the budget
// until release. A body that declares its length reserves it before a
// byte is read: above the cap it is refused (*http.MaxBytesError, 413),
// past the budget too (errdefs.ErrExhausted, 429). A chunked body (no
// Content-Length: the E2B JS SDK sends its JSON so) reserves its bytes as
// they are read, and a read that would pass the budget fails with
// ErrExhausted and closes the connection; reserving the cap up front for
// it let only two small chunked requests in at once. release gives the
// reservation back and clears the read deadline; call it once what was
// decoded is dropped.
func (b *Bodies) Hold(w http.ResponseWriter, r *http.Request) (_ io.Reader, release func(), _ error) {
	n := r.ContentLength
	if n > b.lim.MaxBodyBytes {
		w.Header().Set("Connection", "close")
		return nil, nil, &http.MaxBytesError{Limit: b.lim.MaxBodyBytes}
	}
	if n >= 0 && !b.take(n) {
		return nil, nil, b.full()
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(b.lim.BodyTimeout))
	var body io.Reader = http.MaxBytesReader(w, readCloser{clientBody{r.Body}, r.Body}, b.lim.MaxBodyBytes)
	var metered *meteredReader
	if n < 0 {
		metered = &meteredReader{r: body, b: b, w: w}
		body = metered
	}
	var once sync.Once
	return body, func() {
		once.Do(func() {
			_ = rc.SetReadDeadline(time.Time{})
			if metered != nil {
				n = metered.taken()
			}
			b.give(n)
			if n >= freeAfter {
				b.FreeAfter(r)
			}
		})
	}, nil
}

func (b *Bodies) full() error {
	return errdefs.New(errdefs.ErrExhausted, fmt.Sprintf(
		"request bodies in flight fill the daemon's %d MiB budget; retry shortly", b.max>>20))
}

// meteredReader reserves a chunked body's bytes from the budget as they
// are read.
type meteredReader struct {
	r   io.Reader
	b   *Bodies
	w   http.ResponseWriter
	mu  sync.Mutex
	n   int64
	err error
}

func (m *meteredReader) Read(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return 0, m.err
	}
	k, err := m.r.Read(p)
	if k > 0 {
		if !m.b.takeBeside(int64(k), m.n) {
			// What was not reserved is not handed on: the request is
			// refused, and the rest of its body is not read.
			m.w.Header().Set("Connection", "close")
			m.err = m.b.full()
			return 0, m.err
		}
		m.n += int64(k)
	}
	return k, err
}

func (m *meteredReader) taken() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
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
	return http.MaxBytesReader(w, readCloser{clientBody{r.Body}, r.Body}, max), func() { _ = rc.SetReadDeadline(time.Time{}) }, nil
}

type readCloser struct {
	io.Reader
	io.Closer
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
	if errors.Is(err, ErrBodyBroken) {
		w.Header().Set("Connection", "close")
	}
	return err
}

// ToHTTP is err's status and /v1 wire code: the kit's own errors by
// Status, the core's classes by errhttp. /v1, E2B's control plane and
// envd's /files all answer through it, so a slow body is a 408 on each.
func ToHTTP(err error) (status int, code string) {
	if st, c, ok := Status(err); ok {
		return st, c
	}
	return errhttp.ToHTTP(err)
}

// Status is the status and /v1 wire code of the kit's own errors (a body
// that did not arrive in time, one that is not JSON); ok is false for any
// other error.
func Status(err error) (status int, code string, ok bool) {
	switch {
	case errors.Is(err, ErrBodyTimeout):
		return http.StatusRequestTimeout, agentapi.CodeRequestTimeout, true
	case errors.Is(err, ErrMediaType):
		return http.StatusUnsupportedMediaType, agentapi.CodeUnsupportedMediaType, true
	}
	return 0, "", false
}
