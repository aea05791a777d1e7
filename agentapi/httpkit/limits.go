package httpkit

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// The defaults of Limits, the same on both listeners.
const (
	// DefaultMaxHeaderBytes bounds a request's line and headers. Go's own
	// default is 1 MiB, which let 200 connections each sending a 1 MiB
	// header line hold 200 MiB of the daemon; no client of either API
	// sends more than a few KiB (an E2B signed URL is under 1 KiB).
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultMaxBodyBytes bounds one request body read into memory.
	DefaultMaxBodyBytes = 64 << 20
	// DefaultBodyTimeout is how long a client has to send a body.
	DefaultBodyTimeout = 30 * time.Second
	// DefaultReadHeaderTimeout is how long a client has to send its headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultWriteTimeout is how long a client has to take an answer (or
	// one event of a stream), plus a second per MiB of it (MinReadRate).
	DefaultWriteTimeout = 30 * time.Second
	// DefaultIdleTimeout closes a keep-alive connection idle that long.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultMaxConns bounds the connections served at once.
	DefaultMaxConns = 1024
)

// The defaults of the per-peer and first-request budgets, as fractions of
// MaxConns: half the slots for one peer, an eighth (at least 8) for
// connections that have not yet sent a whole request.
const (
	DefaultConnsPerPeerDivisor = 2
	DefaultNewConnsDivisor     = 8
)

// Limits is what one request, and all of them together, may cost the
// daemon. Zero fields take the defaults above (Or).
type Limits struct {
	// MaxHeaderBytes bounds the request line and headers (431 past it).
	MaxHeaderBytes int
	// MaxBodyBytes bounds one request body read into memory (413); a
	// declared length above it is refused before a byte is read.
	MaxBodyBytes int64
	// MaxBodyBytesInFlight bounds the body bytes held at once (default
	// 2*MaxBodyBytes); past it requests are refused with 429 before their
	// body is read, so that parallel big bodies cannot run the daemon out
	// of memory.
	MaxBodyBytesInFlight int64
	// BodyTimeout is how long a client has to send a request's body; a
	// slower one gets 408 and its connection is closed.
	BodyTimeout time.Duration
	// WriteTimeout is how long a client has to take an answer, or one
	// event of a stream, plus a second per MiB of it (WriteDeadline); past
	// it the connection is closed, and the run's slot, sandbox and result
	// are freed.
	WriteTimeout time.Duration
	// ReadHeaderTimeout and IdleTimeout: net/http's.
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	// MaxConns bounds the connections served at once. When all are
	// taken, a new connection takes the slot of the longest-idle
	// keep-alive one; with none idle it waits in the kernel's accept
	// backlog. The run slots, not this, bound the work.
	MaxConns int
	// MaxConnsPerPeer bounds one peer's connections (a uid on the Unix
	// socket, an address on TCP; default MaxConns/2). Past it the peer's
	// own idle, then still-unsent, connections make room, else the new
	// one is closed.
	MaxConnsPerPeer int
	// MaxNewConns bounds the connections that have not yet sent a whole
	// request (default MaxConns/8, at least 8): past it the oldest of the
	// peer holding most of them is closed, so that slow or silent
	// connections cannot take the slots of clients that send requests.
	MaxNewConns int
	// NewConnsPerPeerPerSecond bounds how many new connections of one
	// peer are handed to the server a second (default MaxNewConns, a burst
	// of as many). The peer's others wait accepted but unread, newest
	// first, and are closed after ReadHeaderTimeout.
	NewConnsPerPeerPerSecond int
}

// Or returns l with its zero fields filled with the defaults.
func (l Limits) Or() Limits {
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.MaxBodyBytesInFlight <= 0 {
		l.MaxBodyBytesInFlight = 2 * l.MaxBodyBytes
	}
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = DefaultBodyTimeout
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = DefaultWriteTimeout
	}
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultMaxConns
	}
	if l.MaxConnsPerPeer <= 0 {
		l.MaxConnsPerPeer = max(1, l.MaxConns/DefaultConnsPerPeerDivisor)
	}
	if l.MaxNewConns <= 0 {
		l.MaxNewConns = min(l.MaxConns, max(8, l.MaxConns/DefaultNewConnsDivisor))
	}
	if l.NewConnsPerPeerPerSecond <= 0 {
		l.NewConnsPerPeerPerSecond = l.MaxNewConns
	}
	return l
}

// Server returns an http.Server for h with l's header limit and deadlines
// (l filled with Or first), requests' contexts derived from base, and
// net/http's own complaints logged as warnings (log nil discards them).
func (l Limits) Server(h http.Handler, base context.Context, log *slog.Logger) *http.Server {
	l = l.Or()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Handler:           closeUnread(h),
		BaseContext:       func(net.Listener) context.Context { return base },
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
