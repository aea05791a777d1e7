package pool

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/clock"
	"github.com/nsbox/nsbox/container/runner"
)

// Lifetime is the sandbox life limit of a pooled runner. It is long on
// purpose: a pooled runner may wait for hours. Whoever takes it bounds it:
// a one-shot run by its Exec timeout (and the kill InterruptGrace later),
// a session by its own lifetime timer.
const Lifetime = 10 * 365 * 24 * time.Hour

// PreimportTimeout bounds a refill's pre-imports.
const PreimportTimeout = 2 * time.Minute

// busyPoll is how often a paused refill looks again at the run slots.
const busyPoll = 20 * time.Millisecond

// maxBackoff bounds the wait between failed refills of a profile.
const maxBackoff = 30 * time.Second

// Profile describes the runners one pool keeps ready.
type Profile struct {
	// Name names the profile in /v1/info and metrics.
	Name string
	// Rootfs is the rootfs name (Config.Acquire resolves it).
	Rootfs string
	// Limits: MemoryBytes, Pids, CPUs and DiskBytes are the sandbox's and
	// must equal a request's for it to match (zero fields take
	// container.DefaultLimits). Timeout and OutputBytes are per run and
	// ignored.
	Limits container.Limits
	// Env holds KEY=VALUE pairs a request must have exactly (in any order).
	Env []string
	// Preimport lists modules imported before the runner is ready;
	// modules missing from the rootfs are skipped.
	Preimport []string
	// Size is how many runners are kept ready.
	Size int
	// Language is the runners' interpreter (zero: Python). Node runners
	// are never forked from a zygote.
	Language runner.Language
}

// Key is what a run or session needs of a runner.
type Key struct {
	Rootfs    string
	RootfsDir string
	Limits    container.Limits
	Env       []string
	// Stdin: a run with standard input can't use a runner that is already
	// running.
	Stdin bool
	// Language is the interpreter the run or session needs (zero: Python).
	Language runner.Language
}

// AcquireFunc resolves a rootfs name to its directory and holds it until
// release is called (the daemon's rootfs store).
type AcquireFunc func(rootfs string) (dir string, release func(), err error)

// Config configures a Pool. Starter and Acquire are required.
type Config struct {
	// Starter starts the pooled runners' sandboxes. When it is also a
	// Zygotes (zygote.Set is both), the pool replaces its runners that a
	// zygote did not fork once that zygote is ready.
	Starter  runner.Starter
	Acquire  AcquireFunc
	Profiles []Profile
	// Refills is how many runners of one profile may be starting at once
	// (default 1): the pool's CPU budget.
	Refills int
	Logger  *slog.Logger // nil discards
	// Clock times the busy pauses and failure back-offs (nil: the real
	// clock; tests move a fake one).
	Clock clock.Clock
}

// Pool keeps runners ready. It is safe for concurrent use.
type Pool struct {
	cfg       Config
	log       *slog.Logger
	profiles  []*profile
	unmatched atomic.Uint64
	start     func(context.Context, container.Spec, runner.Language) (member, error) // startRunner; tests start fakes
	zygotes   Zygotes                                                                // nil: the Starter forks from no zygote

	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup // refills and zygote followers
	watchers sync.WaitGroup // one per ready runner
	started  sync.Once
}

// New checks the profiles and returns a Pool that holds no runner until
// Start.
func New(cfg Config) (*Pool, error) {
	if cfg.Starter == nil || cfg.Acquire == nil {
		return nil, fmt.Errorf("%w: Config.Starter and Config.Acquire are required", ErrInvalidProfile)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Refills <= 0 {
		cfg.Refills = 1
	}
	p := &Pool{cfg: cfg, log: cfg.Logger, start: startRunner(cfg.Starter)}
	p.zygotes, _ = cfg.Starter.(Zygotes)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	names := map[string]bool{}
	for _, pr := range cfg.Profiles {
		switch {
		case pr.Name == "":
			return nil, fmt.Errorf("%w: a profile has no name", ErrInvalidProfile)
		case names[pr.Name]:
			return nil, fmt.Errorf("%w: %q defined twice", ErrInvalidProfile, pr.Name)
		case pr.Rootfs == "":
			return nil, fmt.Errorf("%w: %q names no rootfs", ErrInvalidProfile, pr.Name)
		case pr.Size < 0:
			return nil, fmt.Errorf("%w: %q: size %d is negative", ErrInvalidProfile, pr.Name, pr.Size)
		}
		names[pr.Name] = true
		pr.Language = pr.Language.Or()
		pr.Limits = pr.Limits.WithDefaults()
		pr.Env = slices.Sorted(slices.Values(pr.Env))
		for _, q := range p.profiles {
			if q.Rootfs == pr.Rootfs && q.Language == pr.Language && sameLimits(q.Limits, pr.Limits) && slices.Equal(q.Env, pr.Env) {
				return nil, fmt.Errorf("%w: %q and %q have the same rootfs, language, limits and env (give one of them a different size instead)", ErrInvalidProfile, q.Name, pr.Name)
			}
		}
		p.profiles = append(p.profiles, &profile{Profile: pr, pool: p, kick: make(chan struct{}, 1), log: p.log.With("pool", pr.Name)})
	}
	return p, nil
}

// Start begins filling the pool. busy, when set, reports that live runs
// hold every run slot; refills wait while it does.
func (p *Pool) Start(busy func() bool) {
	p.started.Do(func() {
		for _, pr := range p.profiles {
			if pr.Size == 0 {
				continue
			}
			if p.zygotes != nil {
				p.wg.Add(1)
				go func() {
					defer p.wg.Done()
					pr.follow(p.ctx, p.zygotes)
				}()
			}
			for range p.cfg.Refills {
				p.wg.Add(1)
				go func() {
					defer p.wg.Done()
					pr.refill(p.ctx, busy)
				}()
			}
			pr.signal()
		}
	})
}

// Close stops refilling and ends every runner still waiting in the pool.
// Runners already taken are their takers' to close.
func (p *Pool) Close() {
	p.cancel()
	p.wg.Wait() // refills end; from here no entry is added
	var wg sync.WaitGroup
	for _, pr := range p.profiles {
		pr.mu.Lock()
		ready := pr.ready
		pr.ready = nil
		pr.mu.Unlock()
		for _, e := range ready {
			close(e.taken)
			wg.Add(1)
			go func() {
				defer wg.Done()
				e.discard()
			}()
		}
	}
	wg.Wait()
	p.watchers.Wait()
}

// Taken is a runner taken from the pool. It serves one run or one session.
// End it with Close or Kill, which also let go of the pool's hold on its
// rootfs, or hand the runner over with Detach.
type Taken struct {
	*runner.Runner
	e    *entry
	pr   *profile
	once sync.Once
	// Profile names the pool profile it came from.
	Profile string
	// CPUBefore is the CPU time the sandbox used before it was taken (the
	// interpreter's start and the pre-imports), to subtract from the
	// run's.
	CPUBefore time.Duration
	// Waited is how long it waited in the pool.
	Waited time.Duration
}

// Close ends the runner (Runner.Close), then lets go of the rootfs; the
// pool refills.
func (t *Taken) Close() (*container.Result, error) {
	defer t.finish()
	return t.Runner.Close()
}

// Kill ends the runner at once (Runner.Kill), then lets go of the rootfs;
// the pool refills.
func (t *Taken) Kill(v container.Status) (*container.Result, error) {
	defer t.finish()
	return t.Runner.Kill(v)
}

// Detach lets go of the pool's hold on the rootfs and returns the runner,
// for a taker that holds the rootfs itself for the runner's whole life
// (a session); the pool refills.
func (t *Taken) Detach() *runner.Runner {
	t.finish()
	return t.Runner
}

func (t *Taken) finish() {
	t.once.Do(func() {
		t.e.relOnce.Do(t.e.release)
		t.pr.done()
	})
}

// Take returns a ready runner of the profile matching key, or nil when no
// profile matches (a cold start) or none of its runners is ready (a miss).
// The runner's workspace is empty; write input files with
// Sandbox().Workspace().
func (p *Pool) Take(key Key) *Taken {
	pr := p.match(key)
	if pr == nil {
		p.unmatched.Add(1)
		return nil
	}
	for {
		e := pr.pop(key.RootfsDir)
		if e == nil {
			pr.count(&pr.misses)
			return nil
		}
		if !e.m.alive() {
			pr.count(&pr.discarded)
			go func() {
				e.discard()
				pr.done()
			}()
			continue
		}
		if err := e.m.foreground(); err != nil {
			p.log.Warn("pooled runner: its CPU weight could not be restored; discarding it", "sandbox", e.m.id(), "err", err)
			pr.count(&pr.discarded)
			go func() {
				e.discard()
				pr.done()
			}()
			continue
		}
		pr.count(&pr.hits)
		rm, _ := e.m.(runnerMember) // a fake in tests
		return &Taken{Runner: rm.Runner, e: e, pr: pr, Profile: pr.Name, CPUBefore: e.cpu, Waited: time.Since(e.ready)}
	}
}

// Unmatched counts Take calls no profile matched.
func (p *Pool) Unmatched() uint64 { return p.unmatched.Load() }

func (p *Pool) match(k Key) *profile {
	if k.Stdin {
		return nil
	}
	l := k.Limits.WithDefaults()
	k.Language = k.Language.Or()
	env := k.Env
	if !slices.IsSorted(env) {
		env = slices.Sorted(slices.Values(env))
	}
	for _, pr := range p.profiles {
		if pr.Size > 0 && pr.Rootfs == k.Rootfs && pr.Language == k.Language && sameLimits(pr.Limits, l) && slices.Equal(pr.Env, env) {
			return pr
		}
	}
	return nil
}

// sameLimits compares the limits a pooled sandbox is made with.
func sameLimits(a, b container.Limits) bool { return a.Sandbox() == b.Sandbox() }
