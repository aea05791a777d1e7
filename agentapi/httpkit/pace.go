package httpkit

import (
	"net"
	"sync"
	"time"
)

// pacer hands accepted connections to the server at most rate a second
// per peer (a burst of up to rate at once). A peer's connections past its
// rate are parked: accepted and held, with no goroutine, buffer or read,
// until the peer's next turn, newest first (a client that dials now is
// not queued behind a thousand that dialled earlier and hang), and closed
// after wait. Without it 1,100 reconnecting slowloris connections, each
// closed by the budget of connections without a whole request and back a
// second later, made the daemon set up and tear down 1,000 served
// connections a second; parked, the same clients cost it their file
// descriptors and rate set-ups a second.
type pacer struct {
	rate      float64 // connections a second per peer, and the burst
	maxParked int     // parked at once, all peers
	wait      time.Duration

	mu      sync.Mutex
	peers   map[string]*peerPace
	waiting map[string]*peerPace // the peers with parked connections
	parked  int
	ready   []paced // turned, for Accept to take
	wake    chan struct{}
}

type peerPace struct {
	tokens float64
	last   time.Time
	parked []paced // oldest first
}

type paced struct {
	c    net.Conn
	peer string
	at   time.Time
}

func newPacer(l Limits) *pacer {
	return &pacer{
		rate: float64(l.NewConnsPerPeerPerSecond), maxParked: l.MaxConns, wait: l.ReadHeaderTimeout,
		peers: map[string]*peerPace{}, waiting: map[string]*peerPace{}, wake: make(chan struct{}, 1),
	}
}

// refill adds p's tokens since its last refill; p.mu is held.
func (p *pacer) refill(pp *peerPace, now time.Time) {
	pp.tokens = min(p.rate, pp.tokens+now.Sub(pp.last).Seconds()*p.rate)
	pp.last = now
}

// arrive takes a connection the kernel handed over: ready now if its peer
// has a turn and none parked, else parked.
func (p *pacer) arrive(c net.Conn, peer string) {
	now := time.Now()
	p.mu.Lock()
	pp := p.peers[peer]
	if pp == nil {
		if len(p.peers) >= 4*p.maxParked {
			p.forget(now)
		}
		pp = &peerPace{tokens: p.rate, last: now}
		p.peers[peer] = pp
	}
	p.refill(pp, now)
	var shut net.Conn
	if len(pp.parked) == 0 && pp.tokens >= 1 {
		pp.tokens--
		p.ready = append(p.ready, paced{c, peer, now})
	} else {
		if p.parked >= p.maxParked { // the most parked peer's oldest goes
			most := pp
			for _, w := range p.waiting {
				if len(w.parked) > len(most.parked) {
					most = w
				}
			}
			if len(most.parked) == 0 {
				p.mu.Unlock()
				c.Close()
				return
			}
			shut = most.parked[0].c
			p.unpark(most, 0)
		}
		pp.parked = append(pp.parked, paced{c, peer, now})
		p.waiting[peer] = pp
		p.parked++
	}
	p.mu.Unlock()
	if shut != nil {
		shut.Close()
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// unpark removes pp's i-th parked connection; p.mu is held.
func (p *pacer) unpark(pp *peerPace, i int) {
	peer := pp.parked[i].peer
	pp.parked = append(pp.parked[:i], pp.parked[i+1:]...)
	p.parked--
	if len(pp.parked) == 0 {
		delete(p.waiting, peer)
	}
}

// forget drops the peers with nothing parked and a full bucket; p.mu is held.
func (p *pacer) forget(now time.Time) {
	for k, pp := range p.peers {
		if len(pp.parked) == 0 && pp.tokens+now.Sub(pp.last).Seconds()*p.rate >= p.rate {
			delete(p.peers, k)
		}
	}
}

// turn moves the parked connections whose peers have a turn to ready,
// newest first, and closes those parked past wait; p.mu is held. It
// returns how long until the next parked connection's turn (0: none).
func (p *pacer) turn(now time.Time) (next time.Duration, expired []net.Conn) {
	for _, pp := range p.waiting {
		p.refill(pp, now)
		for len(pp.parked) > 0 && now.Sub(pp.parked[0].at) >= p.wait {
			expired = append(expired, pp.parked[0].c)
			p.unpark(pp, 0)
		}
		for len(pp.parked) > 0 && pp.tokens >= 1 {
			last := len(pp.parked) - 1
			if c := pp.parked[last]; hungUp(c.c) { // its client left: no turn spent
				expired = append(expired, c.c)
			} else {
				pp.tokens--
				p.ready = append(p.ready, c)
			}
			p.unpark(pp, last)
		}
		if len(pp.parked) > 0 {
			d := time.Duration((1 - pp.tokens) / p.rate * float64(time.Second))
			if expire := p.wait - now.Sub(pp.parked[0].at); expire < d {
				d = expire
			}
			if next == 0 || d < next {
				next = max(d, time.Millisecond)
			}
		}
	}
	return next, expired
}

// next returns the next connection to serve and its peer, waiting for
// one; an error from errs, or net.ErrClosed once done is closed.
func (p *pacer) next(done <-chan struct{}, errs <-chan error) (net.Conn, string, error) {
	for {
		p.mu.Lock()
		due, expired := p.turn(time.Now())
		var got *paced
		if len(p.ready) > 0 {
			got = &p.ready[0]
			p.ready = p.ready[1:]
		}
		p.mu.Unlock()
		for _, c := range expired {
			c.Close()
		}
		if got != nil {
			return got.c, got.peer, nil
		}
		var after <-chan time.Time
		var t *time.Timer
		if due > 0 {
			t = time.NewTimer(due)
			after = t.C
		}
		var err error
		select {
		case <-p.wake:
		case <-after:
		case err = <-errs:
		case <-done:
			err = net.ErrClosed
		}
		if t != nil {
			t.Stop()
		}
		if err != nil {
			return nil, "", err
		}
	}
}

// close closes every connection parked or not yet taken.
func (p *pacer) close() {
	p.mu.Lock()
	var all []paced
	all = append(all, p.ready...)
	for _, pp := range p.waiting {
		all = append(all, pp.parked...)
	}
	p.ready, p.waiting, p.parked = nil, map[string]*peerPace{}, 0
	p.mu.Unlock()
	for _, c := range all {
		c.c.Close()
	}
}
