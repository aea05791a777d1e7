package pool

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/runner"
)

// fakeMember is a pooled runner that needs no sandbox.
type fakeMember struct {
	forked bool
	dead   chan struct{}
	once   sync.Once
}

func (m *fakeMember) Preimport(context.Context, []string, time.Duration) ([]string, error) {
	return nil, nil
}

func (m *fakeMember) Kill(container.Status) (*container.Result, error) {
	m.once.Do(func() { close(m.dead) })
	return &container.Result{}, nil
}

func (m *fakeMember) Forked() bool { return m.forked }

func (m *fakeMember) alive() bool {
	select {
	case <-m.dead:
		return false
	default:
		return true
	}
}

func (m *fakeMember) done() <-chan struct{} { return m.dead }
func (m *fakeMember) cpu() time.Duration    { return 0 }
func (m *fakeMember) id() string            { return "fake" }
func (m *fakeMember) foreground() error     { return nil }

// fakeZygote is a Starter whose runners are forked while its zygote is
// ready and cold otherwise, and which tells the pool when it changes.
type fakeZygote struct {
	mu      sync.Mutex
	ready   bool
	changed chan struct{}
	members []*fakeMember

	hold     chan struct{} // when set, starts wait for it
	starting chan struct{} // gets a value as each start begins
	inFlight atomic.Int32
	maxSeen  atomic.Int32
}

func newFakeZygote(ready bool) *fakeZygote {
	return &fakeZygote{ready: ready, changed: make(chan struct{}), starting: make(chan struct{}, 64)}
}

func (z *fakeZygote) Start(context.Context, container.Spec) (*container.Sandbox, error) {
	return nil, errors.New("fakeZygote: the pool starts runners through start")
}

func (z *fakeZygote) ZygoteReady(string) (bool, <-chan struct{}) {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.ready, z.changed
}

func (z *fakeZygote) setReady(ready bool) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.ready = ready
	close(z.changed)
	z.changed = make(chan struct{})
}

// start is the pool's start: the runner is forked when the zygote is ready
// as the start begins, as with zygote.Set.
func (z *fakeZygote) start(ctx context.Context, _ container.Spec, _ runner.Language) (member, error) {
	n := z.inFlight.Add(1)
	defer z.inFlight.Add(-1)
	for {
		m := z.maxSeen.Load()
		if n <= m || z.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	z.mu.Lock()
	m := &fakeMember{forked: z.ready, dead: make(chan struct{})}
	z.members = append(z.members, m)
	hold := z.hold
	z.mu.Unlock()
	z.starting <- struct{}{}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	time.Sleep(time.Millisecond) // a start takes time
	return m, nil
}

// killed counts the runners ended so far, forked and cold.
func (z *fakeZygote) killed() (forked, cold int) {
	z.mu.Lock()
	defer z.mu.Unlock()
	for _, m := range z.members {
		if !m.alive() {
			if m.forked {
				forked++
			} else {
				cold++
			}
		}
	}
	return forked, cold
}

// startFakePool starts a pool of size runners on z (profile "ds", rootfs
// "default" in /rootfs).
func startFakePool(t *testing.T, z *fakeZygote, refills, size int) (*Pool, *fixedRootfs) {
	t.Helper()
	rfs := &fixedRootfs{dir: "/rootfs"}
	p, err := New(Config{Starter: z, Acquire: rfs.acquire, Profiles: []Profile{{Name: "ds", Rootfs: "default", Size: size}}, Refills: refills})
	if err != nil {
		t.Fatal(err)
	}
	p.start = z.start
	t.Cleanup(p.Close)
	p.Start(nil)
	return p, rfs
}

// waitStats polls profile 0's stats until ok holds.
func waitStats(t *testing.T, p *Pool, what string, ok func(Stats) bool) Stats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := p.Stats()[0]
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %+v", what, st)
		}
		time.Sleep(time.Millisecond)
	}
}

func full(st Stats) bool       { return st.Ready == st.Size && st.Spawning == 0 }
func allForked(st Stats) bool  { return full(st) && st.Forked == st.Size }
func noneForked(st Stats) bool { return full(st) && st.Forked == 0 }

func TestColdRunnersReplacedWhenZygoteReady(t *testing.T) {
	z := newFakeZygote(false)
	p, rfs := startFakePool(t, z, 2, 4)
	waitStats(t, p, "a full pool of cold runners", noneForked)

	z.setReady(true)
	st := waitStats(t, p, "the cold runners replaced by zygote children", allForked)
	if st.Replaced != 4 || st.Discarded != 0 || st.Refills != 8 {
		t.Errorf("replaced %d discarded %d refills %d; want 4, 0, 8", st.Replaced, st.Discarded, st.Refills)
	}
	if forked, cold := z.killed(); forked != 0 || cold != 4 {
		t.Errorf("killed %d forked and %d cold runners; want 0 and 4", forked, cold)
	}
	if n := rfs.holds.Load(); n != 4 {
		t.Errorf("%d rootfs holds; want 4 (the ready runners')", n)
	}
	if m := z.maxSeen.Load(); m > 2 {
		t.Errorf("%d starts at once; the refill budget is 2", m)
	}
	tk := p.Take(Key{Rootfs: "default", RootfsDir: "/rootfs"})
	if tk == nil || !tk.e.m.Forked() {
		t.Fatal("Take after the zygote came up: no runner, or a cold one")
	}
	tk.Detach()
}

// A zygote that dies takes its children with it; the pool refills cold
// while it is down, and replaces those once it is back.
func TestZygoteRestartReplacesColdRunners(t *testing.T) {
	z := newFakeZygote(true)
	p, _ := startFakePool(t, z, 1, 2)
	waitStats(t, p, "a full pool of zygote children", allForked)

	z.setReady(false)
	z.mu.Lock()
	children := append([]*fakeMember(nil), z.members...)
	z.mu.Unlock()
	for _, m := range children {
		m.Kill(container.StatusKilled)
	}
	st := waitStats(t, p, "cold runners while the zygote is down", noneForked)
	if st.Discarded != 2 || st.Replaced != 0 {
		t.Errorf("discarded %d replaced %d; want 2, 0", st.Discarded, st.Replaced)
	}

	z.setReady(true)
	st = waitStats(t, p, "the cold runners replaced after the restart", allForked)
	if st.Replaced != 2 {
		t.Errorf("replaced %d; want 2", st.Replaced)
	}
}

// A runner whose start began cold before the zygote came up, and ended
// after the pool replaced its cold runners, is replaced too.
func TestColdRefillInFlightReplaced(t *testing.T) {
	z := newFakeZygote(false)
	z.hold = make(chan struct{})
	p, _ := startFakePool(t, z, 1, 1)
	<-z.starting // a cold start is under way

	z.mu.Lock()
	hold := z.hold
	z.hold = nil
	z.mu.Unlock()
	z.setReady(true)
	pr := p.profiles[0]
	waitStats(t, p, "the pool to see the zygote ready", func(Stats) bool {
		pr.mu.Lock()
		defer pr.mu.Unlock()
		return pr.epoch > 0
	})
	close(hold)
	st := waitStats(t, p, "a zygote child in place of the cold start", allForked)
	if st.Replaced != 1 {
		t.Errorf("replaced %d; want 1", st.Replaced)
	}
	if _, cold := z.killed(); cold != 1 {
		t.Errorf("%d cold runners ended; want 1", cold)
	}
}

// A runner already taken is its taker's: the pool does not end it when
// the zygote comes up, and it still counts against the size until the
// taker is done with it.
func TestTakenColdRunnerKept(t *testing.T) {
	z := newFakeZygote(false)
	p, _ := startFakePool(t, z, 1, 2)
	waitStats(t, p, "a full pool of cold runners", noneForked)
	tk := p.Take(Key{Rootfs: "default", RootfsDir: "/rootfs"})
	if tk == nil {
		t.Fatal("no runner taken from a full pool")
	}

	z.setReady(true)
	st := waitStats(t, p, "one zygote child beside the taken runner", func(st Stats) bool {
		return st.Ready == 1 && st.Forked == 1 && st.Spawning == 0
	})
	if st.Replaced != 1 {
		t.Errorf("replaced %d; want 1", st.Replaced)
	}
	if !tk.e.m.alive() {
		t.Fatal("the pool ended a taken runner")
	}
	tk.Detach()
	waitStats(t, p, "the pool refilled after the taker was done", allForked)
}

// While every run slot is busy, refills wait, except those a ready zygote
// forks: a forked refill costs what a run forked on request would.
func TestBusyHoldsOnlyColdRefills(t *testing.T) {
	for _, ready := range []bool{false, true} {
		z := newFakeZygote(ready)
		rfs := &fixedRootfs{dir: "/rootfs"}
		p, err := New(Config{Starter: z, Acquire: rfs.acquire, Profiles: []Profile{{Name: "ds", Rootfs: "default", Size: 2}}})
		if err != nil {
			t.Fatal(err)
		}
		p.start = z.start
		p.Start(func() bool { return true })
		if ready {
			waitStats(t, p, "zygote refills while busy", allForked)
		} else {
			time.Sleep(10 * busyPoll)
			if st := p.Stats()[0]; st.Ready != 0 || st.Refills != 0 {
				t.Errorf("cold refills while busy: %+v", st)
			}
		}
		p.Close()
	}
}
