// Package zygote keeps one zygote per configured rootfs (a Python
// interpreter in a sandbox of its own that has imported the data-science
// stack once) and routes every Python run it can to a child of it: the
// child starts with pandas, matplotlib and the rest already imported, in
// fresh namespaces, its own cgroup and uid, verified by the engine before
// it runs anything.
//
// A Set is a runner.Starter. Runs it cannot route (other rootfs, commands
// other than python3 -I -c, a zygote that is down, full or whose child
// failed verification) start on the engine as before. A zygote that dies is
// restarted with backoff. ZygoteReady tells a warm pool when a zygote
// comes up, so that it can replace the runners it started cold meanwhile.
package zygote

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nsbox/nsbox/container"
)

// DefaultModules is what a zygote imports unless configured otherwise: the
// data-science stack, each when the rootfs has it.
func DefaultModules() []string {
	return []string{"numpy", "pandas", "matplotlib", "matplotlib.pyplot", "scipy", "sklearn"}
}

// DefaultLeanModules are the lean zygote's (Profile.Lean) by default: a
// pandas cell is the common data-science run.
func DefaultLeanModules() []string { return []string{"numpy", "pandas"} }

// Backoff bounds between failed zygote starts.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// Profile is one zygote.
type Profile struct {
	// Rootfs is the rootfs name (Config.Acquire resolves it).
	Rootfs string
	// Modules are imported in the zygote. On a rootfs with none of them
	// the zygote is bare when Bare is set (the interpreter and the
	// prelude: still forked faster than a fresh interpreter starts,
	// measured 11.8 ms against 29.6 ms p50 through the daemon), else there
	// is none (state "unused").
	Modules []string
	Bare    bool
	// Lean marks a second, smaller zygote on the rootfs: it takes the
	// Python runs whose imports it holds as well as the main one does
	// (Spec.Imports), and the main one takes the rest. A fork costs in
	// proportion to the zygote's memory, so a pandas cell forked from a
	// zygote of numpy and pandas alone is cheaper than one forked from
	// the whole data-science stack. At most one per rootfs, never bare.
	Lean bool
	// Children, MemoryBytes and HugePages are container.ZygoteConfig's.
	Children    int
	MemoryBytes int64
	HugePages   bool
}

// Config configures a Set. Engine and Acquire are required.
type Config struct {
	Engine   *container.Engine
	Acquire  func(rootfs string) (dir string, release func(), err error)
	Profiles []Profile
	// Env is the zygotes' environment for their imports
	// (runner.ZygoteEnv).
	Env []string
	// Prelude is run in each zygote after its imports
	// (runner.ZygotePrelude).
	Prelude string
	// Held are string constants of Prelude, by value, to their names
	// (container.ZygoteConfig.Held; runner.ZygoteHeld).
	Held   map[string]string
	Logger *slog.Logger // nil discards
}

// Set runs the configured zygotes and routes runs to them.
type Set struct {
	cfg    Config
	log    *slog.Logger
	slots  []*slot
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// slot is one profile's zygote, restarted when it dies.
type slot struct {
	p     Profile
	ready chan struct{} // closed once the first start has ended, either way

	mu       sync.Mutex
	z        *container.Zygote // nil while down
	dir      string
	state    string        // "starting", "ready", "restarting", "unused" (no module imports), "closed"
	changed  chan struct{} // closed and replaced when state changes
	lastErr  string
	restarts uint64
	skipped  []string

	forks     atomic.Uint64 // runs routed to the zygote
	fallbacks atomic.Uint64 // runs it should have taken that went to the engine
	full      atomic.Uint64 // of those, the ones it had no free child slot for

	// A spell of fallbacks: from the first after a fork to the next fork.
	falling        atomic.Bool
	spellFrom      atomic.Uint64 // fallbacks before the spell
	lastFallback   string        // under mu
	lastFallbackAt time.Time     // under mu
}

// New starts the zygotes in the background and returns at once; runs fall
// back to the engine until a zygote is ready.
func New(cfg Config) (*Set, error) {
	if cfg.Engine == nil || cfg.Acquire == nil {
		return nil, errors.New("zygote: Config.Engine and Config.Acquire are required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Set{cfg: cfg, log: log, ctx: ctx, cancel: cancel}
	type key struct {
		rootfs string
		lean   bool
	}
	seen := map[key]bool{}
	for _, p := range cfg.Profiles {
		if seen[key{p.Rootfs, p.Lean}] {
			cancel()
			return nil, fmt.Errorf("zygote: rootfs %q configured twice", p.Rootfs)
		}
		seen[key{p.Rootfs, p.Lean}] = true
		p.Bare = p.Bare && !p.Lean
		sl := &slot{p: p, ready: make(chan struct{}), state: "starting", changed: make(chan struct{})}
		s.slots = append(s.slots, sl)
		s.wg.Add(1)
		go s.supervise(sl)
	}
	return s, nil
}

// WaitReady waits until every zygote's first start has ended (ready,
// failed or unused) or ctx ends.
func (s *Set) WaitReady(ctx context.Context) error {
	for _, sl := range s.slots {
		select {
		case <-sl.ready:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Close stops the zygotes (their live children die with them).
func (s *Set) Close() {
	s.cancel()
	s.wg.Wait()
}

// supervise keeps sl's zygote running until the Set closes.
func (s *Set) supervise(sl *slot) {
	defer s.wg.Done()
	log := s.log.With("rootfs", sl.p.Rootfs, "lean", sl.p.Lean)
	backoff := minBackoff
	first := true
	for s.ctx.Err() == nil {
		t0 := time.Now()
		z, release, skipped, err := s.start(sl.p)
		if errors.Is(err, errUnused) {
			log.Info("no zygote: the rootfs has none of its modules (bare zygotes are off)", "modules", strings.Join(sl.p.Modules, ","))
			sl.set(nil, "", "unused", "", slices.Clone(sl.p.Modules))
			if first {
				close(sl.ready)
			}
			return
		}
		if err != nil {
			sl.set(nil, "", "restarting", err.Error(), nil)
			log.Warn("zygote start failed; Python runs start cold meanwhile", "err", err, "retry_in", backoff)
		} else {
			sl.set(z, z.RootfsDir(), "ready", "", skipped)
			log.Info("zygote ready", "took", time.Since(t0).Round(time.Millisecond), "skipped", strings.Join(skipped, ","),
				"bare", len(skipped) == len(sl.p.Modules))
			backoff = minBackoff
		}
		if first {
			close(sl.ready)
			first = false
		}
		if err != nil {
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		select {
		case <-z.Done():
			log.Warn("zygote died; restarting it, Python runs start cold meanwhile")
			sl.mu.Lock()
			sl.restarts++
			sl.mu.Unlock()
		case <-s.ctx.Done():
		}
		sl.set(nil, "", "restarting", "", z.Skipped())
		z.Close()
		release()
	}
	sl.set(nil, "", "closed", "", nil)
}

// errUnused reports a rootfs that has none of a profile's modules, whose
// profile wants no bare zygote.
var errUnused = errors.New("the rootfs has none of the modules")

// start starts p's zygote and returns it with the modules it lacks. A
// rootfs with none of the modules gets a bare zygote (p.Bare): the
// interpreter and the prelude (the runner, compiled) alone, which is still
// cheaper to fork than a fresh interpreter is to start; or none.
func (s *Set) start(p Profile) (_ *container.Zygote, release func(), skipped []string, _ error) {
	dir, release, err := s.cfg.Acquire(p.Rootfs)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("rootfs %s: %w", p.Rootfs, err)
	}
	modules := p.Modules
	if len(modules) > 0 && !hasAnyModule(dir, modules) {
		if !p.Bare {
			release()
			return nil, nil, nil, errUnused
		}
		modules = nil
	}
	z, err := s.cfg.Engine.StartZygote(s.ctx, container.ZygoteConfig{
		ID: "zy-" + container.NewID(), RootfsDir: dir, Modules: modules, Env: s.cfg.Env, Prelude: s.cfg.Prelude, Held: s.cfg.Held,
		Children: p.Children, MemoryBytes: p.MemoryBytes, HugePages: p.HugePages && modules != nil,
	})
	if err != nil {
		release()
		return nil, nil, nil, err
	}
	switch {
	case modules == nil:
		return z, release, slices.Clone(p.Modules), nil
	case len(z.Skipped()) == len(modules) && !p.Bare: // on disk, but none imports
		z.Close()
		release()
		return nil, nil, nil, errUnused
	}
	return z, release, z.Skipped(), nil
}

func (sl *slot) set(z *container.Zygote, dir, state, lastErr string, skipped []string) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if state != sl.state {
		close(sl.changed)
		sl.changed = make(chan struct{})
	}
	sl.z, sl.dir, sl.state = z, dir, state
	if lastErr != "" || state == "ready" {
		sl.lastErr = lastErr
	}
	if skipped != nil {
		sl.skipped = skipped
	}
}

// ZygoteReady reports whether the zygote of rootfs is ready now, and
// returns a channel closed at its next change of state; changed is nil when
// rootfs has no zygote or its zygote will not start again (unused, closed).
// A warm pool follows it to replace, once the zygote is ready, the runners
// it started cold while the zygote was starting or restarting.
func (s *Set) ZygoteReady(rootfs string) (ready bool, changed <-chan struct{}) {
	for _, sl := range s.slots {
		if sl.p.Rootfs != rootfs || sl.p.Lean {
			continue
		}
		sl.mu.Lock()
		defer sl.mu.Unlock()
		if sl.state == "unused" || sl.state == "closed" {
			return false, nil
		}
		return sl.state == "ready", sl.changed
	}
	return false, nil
}

// zygote returns the live zygote for spec's rootfs, if any: its lean one
// when that holds the run's imports as well as the main one does, else
// the main one. Either can run anything (a child imports what its zygote
// lacks), so when only one is up it takes every run.
func (s *Set) zygote(spec *container.Spec) (*container.Zygote, *slot) {
	var main, lean *container.Zygote
	var mainSl, leanSl *slot
	for _, sl := range s.slots {
		sl.mu.Lock()
		z, dir := sl.z, sl.dir
		sl.mu.Unlock()
		switch {
		case z == nil || dir != spec.RootfsDir:
		case sl.p.Lean:
			lean, leanSl = z, sl
		default:
			main, mainSl = z, sl
		}
	}
	if lean != nil && (main == nil || leanServes(lean, main, spec.Imports)) {
		return lean, leanSl
	}
	return main, mainSl
}

// leanServes reports whether a run importing imports (nil: unknown) is
// served as well by lean's child as by main's: each module is in lean's
// sys.modules, or is standard library that main has not loaded either
// (so both children would import it). A module neither holds that is not
// standard library goes to main, whose stack may hold its dependencies.
func leanServes(lean, main *container.Zygote, imports []string) bool {
	if imports == nil {
		return false
	}
	for _, m := range imports {
		if !lean.Has(m) && (main.Has(m) || !lean.Stdlib(m)) {
			return false
		}
	}
	return true
}

// Start runs spec on a zygote's child when one can take it, else on the
// engine. It implements runner.Starter.
func (s *Set) Start(ctx context.Context, spec container.Spec) (*container.Sandbox, error) {
	sb, _, err := s.StartForked(ctx, spec)
	return sb, err
}

// StartForked is Start, and reports whether the sandbox is a zygote's
// child. It implements runner.ForkStarter.
func (s *Set) StartForked(ctx context.Context, spec container.Spec) (_ *container.Sandbox, forked bool, _ error) {
	if z, sl := s.zygote(&spec); z != nil && z.Suitable(&spec) == nil {
		sb, err := z.Start(ctx, spec)
		if err == nil {
			s.forked(sl)
			return sb, true, nil
		}
		if errors.Is(err, container.ErrInvalidSpec) || ctx.Err() != nil {
			return nil, false, err
		}
		s.fallback(sl, spec.ID, err)
	}
	sb, err := s.cfg.Engine.Start(ctx, spec)
	return sb, false, err
}

// Run is Start and Wait (for the server's one-shot runs).
func (s *Set) Run(ctx context.Context, spec container.Spec) (*container.Result, error) {
	sb, err := s.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return sb.Wait()
}

// Stats describes one zygote.
type Stats struct {
	Rootfs    string
	Lean      bool   // the rootfs's lean zygote (Profile.Lean)
	State     string // starting, ready, restarting, unused, closed
	Pid       int    // host pid while ready
	Modules   []string
	Skipped   []string
	Live      int    // children alive now
	Forks     uint64 // runs served by a child
	Fallbacks uint64 // runs it could not take, started cold
	Full      uint64 // of those, the ones that found Children children alive
	Children  int    // the most children alive at once (while ready)
	Restarts  uint64
	LastError string
	// LastFallback is the error of the last run it could not take, at
	// LastFallbackAt (zero: none yet).
	LastFallback   string
	LastFallbackAt time.Time
}

// Stats reports every zygote's state.
func (s *Set) Stats() []Stats {
	out := make([]Stats, 0, len(s.slots))
	for _, sl := range s.slots {
		sl.mu.Lock()
		if sl.p.Lean && sl.state == "unused" { // a rootfs without the lean modules: nothing to report
			sl.mu.Unlock()
			continue
		}
		st := Stats{Rootfs: sl.p.Rootfs, Lean: sl.p.Lean, State: sl.state, Modules: slices.Clone(sl.p.Modules), Skipped: slices.Clone(sl.skipped),
			Restarts: sl.restarts, LastError: sl.lastErr, LastFallback: sl.lastFallback, LastFallbackAt: sl.lastFallbackAt}
		if sl.z != nil {
			st.Pid, st.Live, st.Children = sl.z.Pid(), sl.z.Live(), sl.z.Children()
		}
		sl.mu.Unlock()
		st.Forks, st.Fallbacks, st.Full = sl.forks.Load(), sl.fallbacks.Load(), sl.full.Load()
		out = append(out, st)
	}
	return out
}

// kill kills the zygote of rootfs (tests of the restart path).
func (s *Set) kill(rootfs string) bool {
	for _, sl := range s.slots {
		sl.mu.Lock()
		z := sl.z
		sl.mu.Unlock()
		if sl.p.Rootfs == rootfs && !sl.p.Lean && z != nil {
			z.Kill()
			return true
		}
	}
	return false
}

// hasAnyModule reports whether the rootfs at dir seems to have one of the
// modules (its top-level package or module file) where Debian's python3
// looks: the standard library and the dist-packages directories. It spares
// starting a zygote that would import nothing.
func hasAnyModule(dir string, modules []string) bool {
	var roots []string
	for _, pat := range []string{"usr/lib/python3", "usr/lib/python3/dist-packages", "usr/lib/python3.*", "usr/lib/python3.*/lib-dynload",
		"usr/local/lib/python3.*/dist-packages", "usr/lib/python3.*/site-packages"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		roots = append(roots, m...)
	}
	for _, mod := range modules {
		top, _, _ := strings.Cut(mod, ".")
		for _, r := range roots {
			if _, err := os.Stat(filepath.Join(r, top)); err == nil {
				return true
			}
			if _, err := os.Stat(filepath.Join(r, top+".py")); err == nil {
				return true
			}
			if m, _ := filepath.Glob(filepath.Join(r, top+".*.so")); len(m) > 0 {
				return true
			}
		}
	}
	return false
}
