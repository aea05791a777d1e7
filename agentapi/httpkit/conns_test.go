package httpkit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hang is how long a test waits for what must happen at once: only a
// real hang (a client shut out of every slot) reaches it.
const hang = 10 * time.Second

// budgetServer serves on a real listener ("tcp" on loopback or "unix" in
// a temp dir) within l: GET /block waits until the test ends or release
// is called, anything else answers 200 at once. Header and idle
// deadlines are long, so that only the budget frees a slot.
type budgetServer struct {
	network, addr string
	release       func()
	entered       chan struct{} // one per GET /block that reached its handler
	taken         atomic.Int64  // connections handed to the server
}

// inRequests waits until n GET /block requests are in their handlers.
func (s *budgetServer) inRequests(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-s.entered:
		case <-time.After(hang):
			t.Fatal("GET /block never reached its handler")
		}
	}
}

func serveBudget(t *testing.T, network string, l Limits) *budgetServer {
	t.Helper()
	l.ReadHeaderTimeout, l.IdleTimeout = time.Hour, time.Hour
	unblock := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(unblock) }) }
	entered := make(chan struct{}, 64)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			entered <- struct{}{}
			<-unblock
		}
		io.WriteString(w, "ok")
	})
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "s.sock")
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	hs := l.Server(h, context.Background(), nil)
	s := &budgetServer{network: network, addr: ln.Addr().String(), release: release, entered: entered}
	hs.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.taken.Add(1)
		}
	}
	go hs.Serve(l.Listen(ln, hs))
	t.Cleanup(func() { release(); hs.Close() })
	return s
}

// dial opens a raw connection, from local (a loopback address) when set.
func (s *budgetServer) dial(t *testing.T, local string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: hang}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	c, err := d.Dial(s.network, s.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// send writes a GET of path on c and returns a reader of its answer.
func send(t *testing.T, c net.Conn, path string) *bufio.Reader {
	t.Helper()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	return bufio.NewReader(c)
}

// answer reads one answer from r within hang; it fails on anything but 200.
func answer(c net.Conn, r *bufio.Reader) error {
	c.SetReadDeadline(time.Now().Add(hang))
	defer c.SetReadDeadline(time.Time{})
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

// normal is a normal client: a new connection, one request, its answer.
func (s *budgetServer) normal(t *testing.T, local string) error {
	t.Helper()
	c := s.dial(t, local)
	return answer(c, send(t, c, "/"))
}

var networks = []string{"tcp", "unix"}

// Every slot held by an idle keep-alive connection (one request each,
// then silence): a new client takes the longest-idle one's slot, and a
// connection in a request is never the one closed.
func TestIdleConnsAreReclaimedFirst(t *testing.T) {
	for _, network := range networks {
		t.Run(network, func(t *testing.T) {
			s := serveBudget(t, network, Limits{MaxConns: 16, MaxConnsPerPeer: 64, MaxNewConns: 16})
			var busy []func() error
			for range 4 { // in a request throughout
				c := s.dial(t, "")
				r := send(t, c, "/block")
				busy = append(busy, func() error { return answer(c, r) })
			}
			s.inRequests(t, 4)
			var idle []net.Conn
			for range 12 {
				c := s.dial(t, "")
				if err := answer(c, send(t, c, "/")); err != nil {
					t.Fatal(err)
				}
				idle = append(idle, c)
			}
			for i := range 20 {
				if err := s.normal(t, ""); err != nil {
					t.Fatalf("normal client's request %d with every slot held by an idle connection: %v", i, err)
				}
			}
			// The first idle connection was the longest idle: it is closed.
			idle[0].SetReadDeadline(time.Now().Add(hang))
			if _, err := idle[0].Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
				t.Errorf("the longest-idle connection: read %v, want EOF (closed)", err)
			}
			s.release()
			for i, wait := range busy {
				if err := wait(); err != nil {
					t.Errorf("request %d in progress when slots ran out: %v", i, err)
				}
			}
		})
	}
}

// One peer's connections, each in a request, stop at MaxConnsPerPeer:
// its next one is closed while another peer is served.
func TestConnsPerPeer(t *testing.T) {
	t.Run("tcp", func(t *testing.T) {
		s := serveBudget(t, "tcp", Limits{MaxConns: 16, MaxConnsPerPeer: 8})
		for range 8 {
			send(t, s.dial(t, "127.0.0.2"), "/block")
		}
		s.inRequests(t, 8)
		for range 8 { // closed at once, or (without the cap) in requests
			io.WriteString(s.dial(t, "127.0.0.2"), "GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
		}
		if err := s.normal(t, "127.0.0.1"); err != nil {
			t.Fatalf("another address, with one address holding its share in requests: %v", err)
		}
	})
	t.Run("unix", func(t *testing.T) {
		s := serveBudget(t, "unix", Limits{MaxConns: 16, MaxConnsPerPeer: 8})
		for range 8 {
			send(t, s.dial(t, ""), "/block")
		}
		s.inRequests(t, 8)
		c := s.dial(t, "")
		_, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if err == nil { // written before the daemon closed it
			err = answer(c, bufio.NewReader(c))
		}
		var ne net.Error
		if err == nil || errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("uid %d's 9th connection with 8 slots free: %v, want it closed", os.Getuid(), err)
		}
	})
}

// Slowloris: every slot held by a connection that sent part of its
// headers and stopped. They are held to MaxNewConns, so a client that
// sends its request gets a slot.
func TestNewConnsHaveTheirOwnBudget(t *testing.T) {
	for _, network := range networks {
		t.Run(network, func(t *testing.T) {
			s := serveBudget(t, network, Limits{MaxConns: 16, MaxConnsPerPeer: 64, MaxNewConns: 4})
			for range 32 {
				c := s.dial(t, "")
				if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHo"); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 10 {
				if err := s.normal(t, ""); err != nil {
					t.Fatalf("normal client's request %d beside 32 slowloris connections: %v", i, err)
				}
			}
		})
	}
}

// Reconnecting slowloris: one peer's connections beyond its rate are
// parked, not served, so the server sets up no more of them than the
// rate allows however many the peer opens; and the peer's newest
// connection, a client that sends its request, gets the next turn.
func TestNewConnsArePacedPerPeer(t *testing.T) {
	for _, network := range networks {
		t.Run(network, func(t *testing.T) {
			const rate = 2
			s := serveBudget(t, network, Limits{MaxConns: 64, MaxConnsPerPeer: 64, MaxNewConns: 8, NewConnsPerPeerPerSecond: rate})
			local := "" // one uid on the socket, one address on TCP
			if network == "tcp" {
				local = "127.0.0.1"
			}
			start := time.Now()
			for range 40 {
				if _, err := io.WriteString(s.dial(t, local), "GET / HTTP/1.1\r\nHo"); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.normal(t, local); err != nil {
				t.Fatalf("the peer's newest connection, behind 40 parked ones: %v", err)
			}
			took := time.Since(start)
			if got, most := s.taken.Load(), int64(rate+rate*took.Seconds()+1); got > most {
				t.Errorf("the server took %d connections of one peer in %s, over its %d a second (a burst of %d): at most %d", got, took, rate, rate, most)
			}
		})
	}
}

// hungUp tells a connection whose client has closed it, with or without
// unread bytes, from one still open.
func TestHungUp(t *testing.T) {
	for _, network := range networks {
		t.Run(network, func(t *testing.T) {
			addr := "127.0.0.1:0"
			if network == "unix" {
				addr = filepath.Join(t.TempDir(), "h.sock")
			}
			ln, err := net.Listen(network, addr)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			for _, tc := range []struct {
				name   string
				client func(net.Conn)
				want   bool
			}{
				{"open", func(net.Conn) {}, false},
				{"open with bytes", func(c net.Conn) { io.WriteString(c, "GET") }, false},
				{"closed", func(c net.Conn) { c.Close() }, true},
				{"closed with bytes", func(c net.Conn) { io.WriteString(c, "GET"); c.Close() }, true},
			} {
				c, err := net.Dial(network, ln.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				sc, err := ln.Accept()
				if err != nil {
					t.Fatal(err)
				}
				defer sc.Close()
				tc.client(c)
				got := hungUp(sc)
				for end := time.Now().Add(hang); tc.want && !got && time.Now().Before(end); got = hungUp(sc) {
					runtime.Gosched() // until the close reaches this end (at once on loopback)
				}
				if got != tc.want {
					t.Errorf("%s: hungUp = %v, want %v", tc.name, got, tc.want)
				}
			}
		})
	}
}

// peerKey tells peers apart by uid on a Unix socket and by address on TCP.
func TestPeerKey(t *testing.T) {
	for _, tc := range []struct{ network, addr, want string }{
		{"unix", filepath.Join(t.TempDir(), "k.sock"), fmt.Sprintf("uid %d", os.Getuid())},
		{"tcp", "127.0.0.1:0", "address 127.0.0.1"},
	} {
		ln, err := net.Listen(tc.network, tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		c, err := net.Dial(tc.network, ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sc, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		if got := peerKey(sc); got != tc.want {
			t.Errorf("peerKey of a %s connection = %q, want %q", tc.network, got, tc.want)
		}
	}
}
