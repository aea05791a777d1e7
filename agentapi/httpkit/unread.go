package httpkit

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// closeUnread bounds the wait for a request body a handler left unread
// when its answer is written. Before it writes an answer's header (at the
// handler's first flush, or once it returns) net/http reads up to 256 KiB
// of such a body, to keep the connection, with no deadline: a client that
// declared a body and never sent it, answered early (401 for no key, 429
// for a key at its budget, 404), held the connection, a goroutine and its
// unwritten answer for as long as it liked, in a request, where the
// connection budget never reclaims it. That read now has unreadGrace:
// what a client sent with its request is still read and the connection
// kept; a body that does not come ends the connection, its answer
// written.
//
// The handler reads a counted body; net/http's own is put back as the
// answer is committed, so that net/http still closes at once, without a
// read, a connection whose unread rest is too big to discard (a 40 MiB
// body refused by a budget). A body whose read failed (its deadline: see
// BodyError; a broken encoding) keeps the deadline its reader set.
func closeUnread(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		u := &unreadWriter{ResponseWriter: w, r: r, orig: r.Body}
		u.body = &countedBody{ReadCloser: r.Body}
		r.Body = u.body
		h.ServeHTTP(u, r)
		u.commit()
	})
}

// unreadGrace is how long the rest of a body a handler left unread may
// take to come before the connection is closed.
const unreadGrace = time.Second

// unreadWriter bounds the read of an unread body (commit) before the
// first byte of its answer is committed.
type unreadWriter struct {
	http.ResponseWriter
	r    *http.Request
	orig io.ReadCloser
	body *countedBody
	once sync.Once
	// duplex: the handler reads the body while it answers
	// (EnableFullDuplex); its reads keep their own deadline.
	duplex atomic.Bool
}

func (u *unreadWriter) commit() {
	u.once.Do(func() {
		u.r.Body = u.orig
		if !u.duplex.Load() && !u.body.ended(u.r.ContentLength) {
			_ = http.NewResponseController(u.ResponseWriter).SetReadDeadline(time.Now().Add(unreadGrace)) // ErrHijacked after an upgrade: nothing to do
		}
	})
}

func (u *unreadWriter) WriteHeader(code int) {
	if code >= 200 { // 1xx answers are not the answer
		u.commit()
	}
	u.ResponseWriter.WriteHeader(code)
}

func (u *unreadWriter) Write(p []byte) (int, error) {
	u.commit()
	return u.ResponseWriter.Write(p)
}

// FlushError is what http.ResponseController's Flush calls.
func (u *unreadWriter) FlushError() error {
	u.commit()
	return http.NewResponseController(u.ResponseWriter).Flush()
}

// Flush is http.Flusher's, for handlers that ask for one.
func (u *unreadWriter) Flush() { _ = u.FlushError() }

// EnableFullDuplex is what http.ResponseController's calls.
func (u *unreadWriter) EnableFullDuplex() error {
	u.duplex.Store(true)
	return http.NewResponseController(u.ResponseWriter).EnableFullDuplex()
}

// Unwrap gives http.ResponseController the writer's deadlines, hijack and
// full duplex.
func (u *unreadWriter) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// countedBody counts a request body's bytes read and notes whether a
// read ended it (its end, or an error). A handler may read it from a
// goroutine of its own (a full-duplex stream).
type countedBody struct {
	io.ReadCloser
	n    atomic.Int64
	done atomic.Bool
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	if err != nil {
		b.done.Store(true)
	}
	return n, err
}

// ended reports whether the body was read to its end, or a read of it
// failed: either way, nothing of it is left to wait for under a new
// deadline.
func (b *countedBody) ended(length int64) bool {
	return b.done.Load() || length >= 0 && b.n.Load() >= length
}
