package httpkit

import (
	"bytes"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// conns is the connection budget of one listener: at most max open at
// once, at most perPeer of them from one peer (a uid on a Unix socket, an
// address on TCP), at most maxNew of them that have not yet sent a whole
// request. net/http has no such budget: x/net/netutil.LimitListener's
// semaphore let 1,100 idle keep-alive connections, or slowloris ones that
// reconnect after the header deadline, hold every slot so that a normal
// client got 3 answers in 30 s. So a connection's state is followed
// through http.Server.ConnState, and when a new connection needs a slot
// the budget takes it from the connections doing nothing for anyone:
//
//   - a peer at its cap gives up its own longest-idle connection, else its
//     oldest one still sending its first request, else the new connection
//     is closed;
//   - with maxNew connections still in their first request, the oldest of
//     the peer holding most of them is closed: one the server has read
//     from whose headers are not all in (a client that sends its request
//     at once is past that within a round trip; one that trickles it is
//     not), else the oldest of them (a connection the server has not got
//     round to reading on a busy machine is kept while it can be), once
//     it is minNewAge old; until then Accept waits;
//   - with every slot taken, the longest-idle connection anywhere is
//     closed; when none is idle, Accept waits for a slot.
//
// A connection in a request (net/http's StateActive: its headers are in)
// is never closed here. An idle connection that trickles its next
// request's headers is still idle to net/http, and reclaimable.
type conns struct {
	max, perPeer, maxNew int

	mu      sync.Mutex
	open    map[*budgetConn]struct{}
	fresh   map[*budgetConn]struct{} // the open ones in StateNew
	peers   map[string]int           // open connections per peer
	changed chan struct{}            // a slot freed or a connection went idle (cap 1)
}

// minNewAge is how long a connection may stay in StateNew before a new
// one may take its place in the MaxNewConns budget; until then Accept
// waits. Closing the youngest at once turned 300 slowloris clients that
// reconnect when closed into 8,000 connections a second, whose accepting
// took the CPU the clients that had sent requests needed; a client that
// sends its request with its connection is past StateNew long before.
const minNewAge = 100 * time.Millisecond

// connPhase is where a connection is, as the budget sees it.
type connPhase int

const (
	phaseNew    connPhase = iota // accepted, no whole request yet
	phaseActive                  // in a request, or hijacked
	phaseIdle                    // between requests (or trickling the next one's headers)
)

// budgetConn is an accepted connection the budget counts until it closes.
type budgetConn struct {
	net.Conn
	b     *conns
	peer  string
	phase connPhase
	since time.Time // when it entered its phase
	gone  bool      // no longer counted
	once  sync.Once

	// While the connection is in StateNew its reads are watched: read
	// says the server has tried to read it, headed that the end of the
	// headers ("\r\n\r\n") has come; tail keeps the last 3 bytes read.
	read, headed atomic.Bool
	tail         [3]byte
}

// Read reads from the connection, noting whether the first request's
// headers have come in (the server goroutine is the only reader).
func (c *budgetConn) Read(p []byte) (int, error) {
	if c.headed.Load() {
		return c.Conn.Read(p)
	}
	c.read.Store(true)
	n, err := c.Conn.Read(p)
	if n > 0 {
		buf := append(c.tail[:], p[:n]...)
		if bytes.Contains(buf, []byte("\r\n\r\n")) {
			c.headed.Store(true)
		}
		copy(c.tail[:], buf[len(buf)-3:])
	}
	return n, err
}

// Close closes the connection and gives its slot back.
func (c *budgetConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.b.release(c) })
	return err
}

// Unwrap returns the accepted connection, for peer credentials.
func (c *budgetConn) Unwrap() net.Conn { return c.Conn }

func newConns(l Limits) *conns {
	return &conns{
		max: l.MaxConns, perPeer: l.MaxConnsPerPeer, maxNew: l.MaxNewConns,
		open: map[*budgetConn]struct{}{}, fresh: map[*budgetConn]struct{}{}, peers: map[string]int{},
		changed: make(chan struct{}, 1),
	}
}

func (b *conns) notify() {
	select {
	case b.changed <- struct{}{}:
	default:
	}
}

// drop stops counting c; b.mu is held. It reports whether c was counted.
func (b *conns) drop(c *budgetConn) bool {
	if c.gone {
		return false
	}
	c.gone = true
	delete(b.open, c)
	if b.peers[c.peer]--; b.peers[c.peer] == 0 {
		delete(b.peers, c.peer)
	}
	delete(b.fresh, c)
	return true
}

func (b *conns) release(c *budgetConn) {
	b.mu.Lock()
	dropped := b.drop(c)
	b.mu.Unlock()
	if dropped {
		b.notify()
	}
}

// oldest returns the open connection in phase p (of peer, when not "")
// that entered it first, or nil; b.mu is held.
func (b *conns) oldest(p connPhase, peer string) *budgetConn {
	set := b.open
	if p == phaseNew {
		set = b.fresh
	}
	var o *budgetConn
	for c := range set {
		if c.phase == p && (peer == "" || c.peer == peer) && (o == nil || c.since.Before(o.since)) {
			o = c
		}
	}
	return o
}

// slowest returns the connection in StateNew to close for a new one: of
// the peer with most of them, the oldest that is trickling its headers,
// else the oldest; b.mu is held.
func (b *conns) slowest() *budgetConn {
	count := map[string]int{}
	peer, most := "", 0
	for c := range b.fresh {
		if count[c.peer]++; count[c.peer] > most {
			peer, most = c.peer, count[c.peer]
		}
	}
	var o, any *budgetConn
	for c := range b.fresh {
		if c.peer != peer {
			continue
		}
		if any == nil || c.since.Before(any.since) {
			any = c
		}
		if c.read.Load() && !c.headed.Load() && (o == nil || c.since.Before(o.since)) {
			o = c
		}
	}
	if o == nil {
		return any
	}
	return o
}

// admit counts the new connection c of peer, closing the connections it
// displaces; it waits while every slot is in a request. It returns nil
// when c was refused (and closed) or done was closed.
func (b *conns) admit(c net.Conn, peer string, done <-chan struct{}) *budgetConn {
	for {
		var victims []*budgetConn
		take := func(v *budgetConn) {
			if v != nil && b.drop(v) {
				victims = append(victims, v)
			}
		}
		b.mu.Lock()
		if b.peers[peer] >= b.perPeer {
			v := b.oldest(phaseIdle, peer)
			if v == nil {
				v = b.oldest(phaseNew, peer)
			}
			if v == nil {
				b.mu.Unlock()
				c.Close()
				return nil
			}
			take(v)
		}
		var retry time.Duration // a connection in StateNew may be closed then
		if len(b.fresh) >= b.maxNew {
			v := b.slowest()
			if age := time.Since(v.since); age >= minNewAge {
				take(v)
			} else {
				retry = minNewAge - age
			}
		}
		if retry == 0 && len(b.open) >= b.max {
			take(b.oldest(phaseIdle, ""))
		}
		full := retry > 0 || len(b.open) >= b.max
		var bc *budgetConn
		if !full {
			bc = &budgetConn{Conn: c, b: b, peer: peer, phase: phaseNew, since: time.Now()}
			b.open[bc] = struct{}{}
			b.peers[peer]++
			b.fresh[bc] = struct{}{}
		}
		b.mu.Unlock()
		for _, v := range victims {
			v.Conn.Close() // its server goroutine's read fails; it closes v again
		}
		if !full {
			return bc
		}
		var after <-chan time.Time
		if retry > 0 {
			t := time.NewTimer(retry)
			defer t.Stop()
			after = t.C
		}
		select {
		case <-b.changed:
		case <-after:
		case <-done:
			c.Close()
			return nil
		}
	}
}

// connState follows a connection's state; it is the http.Server's
// ConnState (after any the server had).
func (b *conns) connState(nc net.Conn, s http.ConnState) {
	c, ok := nc.(*budgetConn)
	if !ok {
		return
	}
	b.mu.Lock()
	if c.gone {
		b.mu.Unlock()
		return
	}
	was := c.phase
	switch s {
	case http.StateActive, http.StateHijacked:
		c.phase = phaseActive
	case http.StateIdle:
		c.phase = phaseIdle
	default:
		b.mu.Unlock()
		return
	}
	if was == phaseNew {
		delete(b.fresh, c)
	}
	freed := was == phaseNew || c.phase == phaseIdle
	if was != c.phase {
		c.since = time.Now()
	}
	b.mu.Unlock()
	if freed {
		b.notify()
	}
}

// budgetListener hands out connections within a budget, paced per peer.
type budgetListener struct {
	net.Listener
	b         *conns
	p         *pacer
	errs      chan error
	closeOnce sync.Once
	done      chan struct{}
}

// accept takes what the kernel hands over and gives it to the pacer,
// until the listener is closed.
func (l *budgetListener) accept() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			select {
			case l.errs <- err:
			case <-l.done:
				return
			}
			continue
		}
		l.p.arrive(c, peerKey(c))
	}
}

func (l *budgetListener) Accept() (net.Conn, error) {
	for {
		c, peer, err := l.p.next(l.done, l.errs)
		if err != nil {
			return nil, err
		}
		if bc := l.b.admit(c, peer, l.done); bc != nil {
			return bc, nil
		}
		select {
		case <-l.done:
			return nil, net.ErrClosed
		default:
		}
	}
}

func (l *budgetListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() {
		close(l.done)
		l.p.close()
	})
	return err
}

// Listen wraps ln in l's connection budget (MaxConns, MaxConnsPerPeer,
// MaxNewConns, NewConnsPerPeerPerSecond) and has hs report its connections' states to it (after
// any ConnState hs had): serve hs on the listener returned.
func (l Limits) Listen(ln net.Listener, hs *http.Server) net.Listener {
	b := newConns(l.Or())
	prev := hs.ConnState
	hs.ConnState = func(c net.Conn, s http.ConnState) {
		if prev != nil {
			prev(c, s)
		}
		b.connState(c, s)
	}
	bl := &budgetListener{Listener: ln, b: b, p: newPacer(l.Or()), errs: make(chan error), done: make(chan struct{})}
	go bl.accept()
	return bl
}
