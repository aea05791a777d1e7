package load

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/tests/internal/testdaemon"
)

// scenario is one row of the table: a daemon of its own, the requests
// made to it and what it left.
type scenario struct {
	t   *testing.T
	s   *suite
	row *row
	d   *testdaemon.Daemon

	mu       sync.Mutex
	seen     map[string]bool // sandbox cgroup names seen: their lock files must go
	pid      atomic.Int64    // the daemon's current pid, for the watcher
	stop     chan struct{}   // stops the watcher
	done     chan struct{}
	stopOnce sync.Once
}

func (s *suite) newScenario(t *testing.T, name string) *scenario {
	r := &row{name: name}
	s.mu.Lock()
	s.rows = append(s.rows, r)
	s.mu.Unlock()
	return &scenario{t: t, s: s, row: r, seen: map[string]bool{}}
}

// start starts the scenario's daemon on the test rootfs with room for
// the scenario's clients; args come last and win. It waits until the
// daemon is settled (pools full, zygotes up) and takes the starting RSS.
func (sc *scenario) start(args ...string) *testdaemon.Daemon {
	t := sc.t
	t.Helper()
	sc.d = testdaemon.New(t, sc.s.bin, "nsbox-load-", append([]string{"--log-level", "info", "--queue", "64", "--max-sessions", "64"}, args...)...)
	sc.d.Start(t)
	sc.pid.Store(int64(sc.d.Pid()))
	sc.d.Settle(t)
	sc.row.rssBefore, _ = testdaemon.RSS(sc.d.Pid())
	sc.stop, sc.done = make(chan struct{}), make(chan struct{})
	go sc.watch()
	t.Cleanup(sc.stopWatch)
	return sc.d
}

// restart starts the daemon again after it died.
func (sc *scenario) restart() {
	sc.t.Helper()
	sc.d.Start(sc.t)
	sc.pid.Store(int64(sc.d.Pid()))
}

func (sc *scenario) stopWatch() {
	sc.stopOnce.Do(func() { close(sc.stop) })
	<-sc.done
}

// watch notes the daemon's peak RSS and the names of its sandboxes'
// cgroups until stop is closed.
func (sc *scenario) watch() {
	defer close(sc.done)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		sc.sample()
		select {
		case <-sc.stop:
			return
		case <-tick.C:
		}
	}
}

func (sc *scenario) sample() {
	_, peak := testdaemon.RSS(int(sc.pid.Load()))
	var names []string
	for _, parent := range testdaemon.CgroupParents(sc.t, sc.d.CgroupName) {
		ents, _ := os.ReadDir(parent)
		for _, e := range ents {
			if e.IsDir() {
				names = append(names, e.Name())
			}
		}
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.row.rssPeak = max(sc.row.rssPeak, peak)
	for _, n := range names {
		sc.seen[n] = true
	}
}

// record counts one request: its latency and, when err is not nil, a
// failure (the first few are reported).
func (sc *scenario) record(lat time.Duration, err error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.row.requests++
	sc.row.lat = append(sc.row.lat, lat)
	if err != nil {
		sc.row.failures++
		if sc.row.failures <= 3 {
			sc.t.Errorf("%s: %v", sc.row.name, err)
		}
	}
}

// timed runs f and records it.
func (sc *scenario) timed(f func() error) {
	t0 := time.Now()
	err := f()
	sc.record(time.Since(t0), err)
}

// finish waits until the daemon is idle, takes its RSS, stops it with
// SIGTERM and counts what it left: sandbox cgroups, mounts under its run
// dir, processes below it, liveness lock files of its sandboxes.
func (sc *scenario) finish() {
	t := sc.t
	t.Helper()
	if sc.d == nil {
		return
	}
	d := sc.d
	d.Settle(t)
	now, _ := testdaemon.RSS(d.Pid())
	if sc.row.rssAfter == 0 {
		sc.row.rssAfter = now
	}
	procs := testdaemon.Descendants(d.Pid())
	sc.stopWatch()
	sc.sample()
	if err := d.Signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("daemon exit after SIGTERM: %v", err)
	}
	cgroups := testdaemon.LeftoverCgroups(t, d.CgroupName)
	mounts := testdaemon.Mounts(t, d.RunDir)
	var alive []int
	for _, p := range procs {
		if p.Alive() {
			alive = append(alive, p.Pid)
		}
	}
	var locks []string
	for name := range sc.seen {
		if _, err := os.Stat(testdaemon.LiveLock(d.RunDir, name)); err == nil {
			locks = append(locks, testdaemon.LiveLock(d.RunDir, name))
		}
	}
	sc.row.leftovers = len(cgroups) + len(mounts) + len(alive) + len(locks)
	if sc.row.leftovers > 0 {
		t.Errorf("left behind: cgroups %q, mounts %q, processes %v, lock files %q", cgroups, mounts, alive, locks)
	}
	for _, l := range locks {
		testdaemon.RemoveFreeLock(l)
	}
}

// client returns a client of its own on the daemon's socket and a
// function that closes its idle connections (they hold a goroutine and
// an fd in the daemon, which the leak checks count).
func (sc *scenario) client() (*client.Client, func()) {
	var dl net.Dialer
	tr := &http.Transport{MaxIdleConnsPerHost: 4, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return dl.DialContext(ctx, "unix", sc.d.Sock)
	}}
	return &client.Client{HTTPClient: &http.Client{Transport: tr}}, tr.CloseIdleConnections
}

// retry429 repeats f while the daemon answers 429 (its queue is full).
func retry429[T any](f func() (T, error)) (T, error) {
	for {
		v, err := f()
		var ae *agentapi.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests {
			return v, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}
