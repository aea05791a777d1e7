package load

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
)

// The figures a normal /v1 client must hold beside hostile connections
// (issue 34): at least servedShare of the answers it gets on the same
// daemon when nothing else connects, and a p99 within servedP99. Both are
// flagged in the scenario's row, not failed: measured on a shared machine
// they are timing verdicts, as the suite's other speed targets are. A
// client shut out fails: under shutOutShare of its quiet answers, or a
// p99 past shutOutP99.
const (
	servedShare  = 0.9
	shutOutShare = 0.5
	servedP99    = time.Second
	shutOutP99   = 10 * time.Second
)

// attackSize is how many hostile connections the connection scenarios
// hold, the 1,100 (more than the daemon's 1,024 connection slots)
// at every scale, for how long the normal client is measured beside them,
// 30 s at full scale as in the issue, and in windows of how long: at full
// scale longer than the 10 s header deadline, so that parked connections
// that time out and come back are inside a window.
func (s *suite) attackSize() (conns int, measure, window time.Duration) {
	if s.scale.name == "full" {
		return 1100, 30 * time.Second, 10 * time.Second
	}
	return 1100, 8 * time.Second, 2 * time.Second
}

// idleKeepAlive: connections that send one health request each, then
// stay open and silent.
func (s *suite) idleKeepAlive(t *testing.T, sc *scenario) {
	d := sc.start()
	s.underAttack(t, sc, "unix", d.Sock, func(c net.Conn) error {
		if _, err := io.WriteString(c, "GET /v1/health HTTP/1.1\r\nHost: nsbox\r\n\r\n"); err != nil {
			return err
		}
		r := bufio.NewReader(c)
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil
	})
}

// slowloris: connections that send half a request line and headers and
// nothing more, coming back when the daemon closes them (its header
// deadline, 10 s, or its budget).
func (s *suite) slowloris(t *testing.T, sc *scenario) {
	d := sc.start()
	s.underAttack(t, sc, "unix", d.Sock, func(c net.Conn) error {
		_, err := io.WriteString(c, "GET /v1/health HTTP/1.1\r\nHost: nsb")
		return err
	})
}

// e2bSlowBodies: on the E2B TCP port, without an API key, POST
// /sandboxes with a 4 KiB body sent a byte a second, coming back when
// the daemon closes them.
func (s *suite) e2bSlowBodies(t *testing.T, sc *scenario) {
	addr := freeLoopbackAddr(t)
	sc.start("--e2b-listen", addr, "--e2b-keys", e2bKeys(t))
	s.underAttack(t, sc, "tcp", addr, func(c net.Conn) error {
		_, err := io.WriteString(c, "POST /sandboxes HTTP/1.1\r\nHost: nsbox\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{")
		if err != nil {
			return err
		}
		go func() { // a byte a second, until the connection is closed
			for {
				time.Sleep(time.Second)
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}()
		return nil
	})
}

// comeBack is how long a hostile client waits after the daemon closed its
// connection before it opens another: the attacks are on the connection
// slots, not a flood of connections or requests, which no connection
// budget can stop (each would be answered or closed at once).
const comeBack = time.Second

// attack starts n hostile clients of underAttack and returns once each
// has connected: stop ends them, held counts the connections open now,
// opened all those the daemon took.
func (s *suite) attack(t *testing.T, n int, network, addr string, open func(net.Conn) error) (stop func(), held func() int64, opened *atomic.Int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var nheld atomic.Int64
	opened = new(atomic.Int64)
	first := make(chan struct{}, n)
	stop = func() { cancel(); wg.Wait() }
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			once := false
			for ctx.Err() == nil {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil { // the backlog was full, or the test ends
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if !once { // connected: the daemon has it, or its backlog
					once = true
					first <- struct{}{}
				}
				after := context.AfterFunc(ctx, func() { c.Close() })
				if open(c) == nil {
					opened.Add(1)
					nheld.Add(1)
					io.Copy(io.Discard, c) // until the daemon (or the test's end) closes it
					nheld.Add(-1)
				}
				after()
				c.Close()
				select { // and come back a second later
				case <-ctx.Done():
				case <-time.After(comeBack):
				}
			}
		}()
	}
	for range n {
		select {
		case <-first:
		case <-time.After(2 * time.Minute):
			stop()
			t.Fatalf("the hostile clients could not all connect in 2 minutes (%d held)", nheld.Load())
		}
	}
	return stop, nheld.Load, opened
}

// underAttack measures a normal /v1 client (a health check, then a
// Python run, again and again, on keep-alive connections) in windows
// that alternate: quiet, while hostile connections to network/addr are
// held open (each does open on a new connection, waits until the daemon
// closes it, and starts over comeBack later), quiet again, and so on. The
// quiet figure for each attack window is the mean of the quiet windows
// on either side of it: other work on a shared machine comes and goes
// within seconds (one 8 s quiet window before an attack counted 132
// answers and the one after it 1,064), so a baseline from a single
// window before and after measured the machine, not the attack. The
// figures it must hold are servedShare and servedP99.
func (s *suite) underAttack(t *testing.T, sc *scenario, network, addr string, open func(net.Conn) error) {
	n, measure, attackWindow := s.attackSize()
	rounds := int(measure / attackWindow)
	_, q := s.normalClient(t, sc, attackWindow, false)
	quietWindows := []int{q}
	fds := openFDs(t, sc.d.Pid())
	var lat []time.Duration
	var answers, quiet int
	var nowHeld, opened int64
	for range rounds {
		stop, held, o := s.attack(t, n, network, addr, open)
		l, a := s.normalClient(t, sc, attackWindow, true)
		nowHeld = held()
		stop()
		opened += o.Load()
		settle(t, sc.d.Pid(), fds) // the connections it held are gone
		_, after := s.normalClient(t, sc, attackWindow, false)
		lat, answers = append(lat, l...), answers+a
		quiet += (quietWindows[len(quietWindows)-1] + after) / 2
		quietWindows = append(quietWindows, after)
	}

	p99 := percentile(lat, .99)
	sc.row.note("%d hostile conns (%d held at the end, %d opened); normal client: %d answers in %d windows of %s under attack, %d quiet (windows %v), p99 %d ms",
		n, nowHeld, opened, answers, rounds, attackWindow, quiet, quietWindows, p99.Milliseconds())
	share := float64(answers) / float64(max(quiet, 1))
	switch {
	case share < shutOutShare:
		t.Errorf("beside %d hostile connections a normal client got %d answers in %s, %.0f%% of the %d it got on a quiet daemon: shut out (target >= %.0f%%)",
			n, answers, measure, 100*share, quiet, 100*servedShare)
	case share < servedShare:
		sc.row.note("share %.0f%%, target >= %.0f%% MISSED", 100*share, 100*servedShare)
	default:
		sc.row.note("share %.0f%%, target >= %.0f%% met", 100*share, 100*servedShare)
	}
	switch {
	case p99 > shutOutP99:
		t.Errorf("beside %d hostile connections a normal client's p99 was %s: shut out (target <= %s)", n, p99, servedP99)
	case p99 > servedP99:
		sc.row.note("p99 %s, target <= %s MISSED", p99, servedP99)
	}
}

// normalClient makes health checks and Python runs for d and returns
// their latencies and count; record adds them to the scenario's row.
func (s *suite) normalClient(t *testing.T, sc *scenario, d time.Duration, record bool) ([]time.Duration, int) {
	t.Helper()
	var dials atomic.Int64
	var dl net.Dialer
	tr := &http.Transport{MaxIdleConnsPerHost: 4, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		dials.Add(1)
		return dl.DialContext(ctx, "unix", sc.d.Sock)
	}}
	defer tr.CloseIdleConnections()
	cl := &client.Client{HTTPClient: &http.Client{Transport: tr}}
	defer func() { t.Logf("normal client: %d connections", dials.Load()) }()
	ctx, cancel := context.WithTimeout(context.Background(), d+time.Minute)
	defer cancel()
	var lat []time.Duration
	one := func(f func() error) {
		t0 := time.Now()
		err := f()
		lat = append(lat, time.Since(t0))
		if record {
			sc.record(time.Since(t0), err)
		} else if err != nil {
			t.Errorf("quiet daemon: %v", err)
		}
	}
	for end := time.Now().Add(d); time.Now().Before(end); {
		one(func() error { _, err := cl.Health(ctx); return err })
		one(func() error {
			res, err := cl.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: "print(1)"})
			if err == nil && res.Stdout != "1\n" {
				err = fmt.Errorf("run: %s %q", res.Status, res.Stdout)
			}
			return err
		})
	}
	return lat, len(lat)
}

// openFDs counts pid's open file descriptors.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// settle waits until pid holds no more than 16 descriptors above fds:
// the hostile connections are closed on the daemon's side too, so that
// the next quiet window does not measure their teardown.
func settle(t *testing.T, pid, fds int) {
	t.Helper()
	for end := time.Now().Add(time.Minute); openFDs(t, pid) > fds+16; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("a minute after the hostile clients left, the daemon holds %d descriptors (%d before them)", openFDs(t, pid), fds)
		}
	}
}

// freeLoopbackAddr returns a loopback TCP address nothing listens on now.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// e2bKeys writes a keys file with one key no hostile client knows.
func e2bKeys(t *testing.T) string {
	t.Helper()
	b := make([]byte, 20)
	rand.Read(b)
	path := filepath.Join(t.TempDir(), "e2b-keys")
	if err := os.WriteFile(path, []byte("e2b_"+hex.EncodeToString(b)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
