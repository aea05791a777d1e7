package pool

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nsbox/nsbox/container"
)

// profile is one profile's ready runners and counters.
type profile struct {
	Profile
	pool *Pool
	log  *slog.Logger
	kick chan struct{} // a refill may be needed

	mu        sync.Mutex
	ready     []*entry // oldest first
	spawning  int
	taken     int // taken runners whose taker is not done yet
	hits      uint64
	misses    uint64
	discarded uint64
	replaced  uint64 // cold runners replaced once a zygote was ready
	failures  uint64
	epoch     uint64   // bumped by renew
	skipped   []string // pre-imports the rootfs lacks (logged once)
	lastErr   string
	refills   histogram
}

// entry is one ready runner.
type entry struct {
	m       member
	dir     string
	release func() // the pool's hold on the rootfs
	cpu     time.Duration
	ready   time.Time
	taken   chan struct{} // closed when it leaves the ready list
	relOnce sync.Once
}

// discard ends a runner that will serve nothing.
func (e *entry) discard() {
	e.m.Kill(container.StatusKilled)
	e.relOnce.Do(e.release)
}

func (pr *profile) signal() {
	select {
	case pr.kick <- struct{}{}:
	default:
	}
}

// pop takes the oldest ready runner made on dir. Its refill starts when
// the taker is done with it (Taken.Close, Kill or Detach), so that it does
// not compete with the run for CPU.
func (pr *profile) pop(dir string) *entry {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	for i, e := range pr.ready {
		if e.dir != dir {
			continue
		}
		pr.ready = append(pr.ready[:i], pr.ready[i+1:]...)
		pr.taken++
		close(e.taken)
		return e
	}
	return nil
}

// done is called once per taken runner when its taker is done with it:
// the runner no longer counts against the profile, so a refill follows.
func (pr *profile) done() {
	pr.mu.Lock()
	pr.taken--
	pr.mu.Unlock()
	pr.signal()
}

func (pr *profile) count(c *uint64) {
	pr.mu.Lock()
	*c++
	pr.mu.Unlock()
}

// remove drops e from the ready list; false when it was taken already.
func (pr *profile) remove(e *entry) bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	for i, x := range pr.ready {
		if x == e {
			pr.ready = append(pr.ready[:i], pr.ready[i+1:]...)
			close(e.taken)
			pr.discarded++
			return true
		}
	}
	return false
}

// reserve claims one refill when the profile is short of runners.
func (pr *profile) reserve() bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if len(pr.ready)+pr.spawning+pr.taken >= pr.Size {
		return false
	}
	pr.spawning++
	return true
}

func (pr *profile) unreserve() {
	pr.mu.Lock()
	pr.spawning--
	pr.mu.Unlock()
}

// refill is one refill worker: it starts runners while the profile is
// short of them, pausing while busy reports every run slot taken (unless
// the refill forks from a ready zygote) and backing off after failures.
func (pr *profile) refill(ctx context.Context, busy func() bool) {
	backoff := time.Duration(0)
	for {
		for !pr.reserve() {
			select {
			case <-ctx.Done():
				return
			case <-pr.kick:
			}
		}
		pr.signal() // another worker may take the next one
		for busy != nil && busy() && !pr.forks() {
			select {
			case <-ctx.Done():
				pr.unreserve()
				return
			case <-pr.pool.cfg.Clock.After(busyPoll):
			}
		}
		err := pr.spawn(ctx)
		if err == nil {
			backoff = 0
			continue
		}
		if ctx.Err() != nil {
			return
		}
		backoff = min(max(2*backoff, 100*time.Millisecond), maxBackoff)
		pr.log.Warn("pool refill failed; retrying", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-pr.pool.cfg.Clock.After(backoff):
		}
	}
}

// forks reports whether a refill would now be forked from a ready zygote.
// Such a refill may run while every run slot is busy: it costs what a run
// forked on request would have cost anyway, and a run that takes it
// answers in ~2 ms. A cold refill (an interpreter's start and the
// imports) would take CPU from the runs.
func (pr *profile) forks() bool {
	if pr.pool.zygotes == nil || !pr.Language.Forks() {
		return false
	}
	ready, _ := pr.pool.zygotes.ZygoteReady(pr.Rootfs)
	return ready
}

// spawn starts one runner and adds it to the ready list. The reservation
// is given back either way. A runner started cold while renew ran is
// discarded instead: a zygote has become ready meanwhile.
func (pr *profile) spawn(ctx context.Context) (err error) {
	t0 := time.Now()
	added := false
	pr.mu.Lock()
	epoch := pr.epoch
	pr.mu.Unlock()
	defer func() {
		pr.mu.Lock()
		pr.spawning--
		if err != nil {
			pr.failures++
			pr.lastErr = err.Error()
		}
		pr.mu.Unlock()
		if !added {
			pr.signal()
		}
	}()
	dir, release, err := pr.pool.cfg.Acquire(pr.Rootfs)
	if err != nil {
		return fmt.Errorf("pool %s: rootfs %q: %w", pr.Name, pr.Rootfs, err)
	}
	lim := pr.Limits
	lim.Timeout = Lifetime
	// Made ahead of any run, on the CPU the runs leave: a refill (and its
	// pre-imports) never slows a run that is being served; Take gives the
	// sandbox a run's CPU weight.
	m, err := pr.pool.start(ctx, container.Spec{
		ID: "pool-" + container.NewID(), RootfsDir: dir, Env: pr.Env, Limits: lim, Background: true,
	}, pr.Language)
	if err != nil {
		release()
		return fmt.Errorf("pool %s: %w", pr.Name, err)
	}
	e := &entry{m: m, dir: dir, release: release, taken: make(chan struct{})}
	// Pre-import (if any), and warm the cell path for the first cell.
	pctx, cancel := context.WithTimeout(ctx, PreimportTimeout)
	skipped, err := m.Preimport(pctx, pr.Preimport, PreimportTimeout)
	cancel()
	if err != nil {
		e.discard()
		return fmt.Errorf("pool %s: %w", pr.Name, err)
	}
	pr.noteSkipped(skipped)
	e.cpu = m.cpu()
	took := time.Since(t0)

	pr.mu.Lock()
	if ctx.Err() != nil {
		pr.mu.Unlock()
		e.discard()
		return ctx.Err()
	}
	if !m.Forked() && pr.epoch != epoch {
		pr.replaced++
		pr.mu.Unlock()
		pr.log.Debug("pool runner started cold while a zygote came up; replacing it", "sandbox", m.id())
		e.discard()
		return nil
	}
	e.ready = time.Now()
	pr.ready = append(pr.ready, e)
	pr.refills.observe(took)
	pr.lastErr = ""
	pr.pool.watchers.Add(1)
	pr.mu.Unlock()
	added = true
	go pr.watch(e)
	pr.log.Debug("pool runner ready", "sandbox", m.id(), "forked", m.Forked(), "took", took)
	return nil
}

// watch discards e if its runner dies while it waits in the pool.
func (pr *profile) watch(e *entry) {
	defer pr.pool.watchers.Done()
	select {
	case <-e.taken:
	case <-e.m.done():
		if pr.remove(e) {
			pr.log.Warn("pooled runner died while waiting; replacing it", "sandbox", e.m.id())
			e.discard()
			pr.signal()
		}
	}
}

func (pr *profile) noteSkipped(skipped []string) {
	if len(skipped) == 0 {
		return
	}
	pr.mu.Lock()
	first := pr.skipped == nil
	pr.skipped = skipped
	pr.mu.Unlock()
	if first {
		pr.log.Info("pool pre-imports skipped: not importable in the rootfs", "modules", skipped, "rootfs", pr.Rootfs)
	}
}
