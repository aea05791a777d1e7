package session

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/clock"
	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/container/runner"
)

// Config configures a Manager. Starter is required.
type Config struct {
	Starter runner.Starter
	Logger  *slog.Logger // nil discards
	// MaxSessions caps live sessions (default 16).
	MaxSessions int
	// MaxLifetime is a session's longest life, idle or not (default 24h).
	MaxLifetime time.Duration
	// DefaultIdleTimeout applies when Options.IdleTimeout is 0 (default 15m).
	DefaultIdleTimeout time.Duration
	// OutputBytes caps the output of a session's life, per stream: what
	// its execs return and all that is written between execs
	// (runner.LimitOutput). Past it the session is killed, dead with
	// output_limit (default 64 MiB).
	OutputBytes int64
	// OnEnd, when set, is called once for every session that ends, with
	// the reason's status (metrics).
	OnEnd func(runner.Status)
	// Take, when set, hands out a runner started ahead of time (a warm
	// pool) for a session with opts, or nil when none fits; the session
	// then starts its own. The runner's workspace must be empty and its
	// sandbox must outlive MaxLifetime: the session writes opts.Files and
	// ends the runner at MaxLifetime itself.
	Take func(opts Options) *runner.Runner
	// Park, when set, parks a session whose idle timeout passed with
	// IdleAction IdlePark (the session is not held when it is called); on
	// an error but ErrBusy the session is ended.
	Park func(s *Session) error
	// Clock times lifetimes and idle timeouts (nil: the real clock; tests
	// move a fake one).
	Clock clock.Clock
}

// Manager owns the live sessions. It is safe for concurrent use.
type Manager struct {
	cfg   Config
	log   *slog.Logger
	clock clock.Clock

	mu       sync.Mutex
	sessions map[string]*Session
	live     int
	closed   bool
	wg       sync.WaitGroup // sessions not yet torn down
}

// New returns a Manager.
func New(cfg Config) *Manager {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 16
	}
	if cfg.MaxLifetime <= 0 {
		cfg.MaxLifetime = 24 * time.Hour
	}
	if cfg.DefaultIdleTimeout <= 0 {
		cfg.DefaultIdleTimeout = 15 * time.Minute
	}
	if cfg.OutputBytes <= 0 {
		cfg.OutputBytes = 64 << 20
	}
	return &Manager{cfg: cfg, log: cfg.Logger, clock: clock.Or(cfg.Clock), sessions: map[string]*Session{}}
}

// SetLimits changes the cap on live sessions, the default idle timeout
// and the longest life; zero values keep the current ones. They apply to
// sessions created from now on (live sessions keep theirs; a lower cap
// only refuses new ones).
func (m *Manager) SetLimits(maxSessions int, idle, lifetime time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if maxSessions > 0 {
		m.cfg.MaxSessions = maxSessions
	}
	if idle > 0 {
		m.cfg.DefaultIdleTimeout = idle
	}
	if lifetime > 0 {
		m.cfg.MaxLifetime = lifetime
	}
}

// Create starts a session and returns once its interpreter is ready. On
// error opts.Release has been called.
func (m *Manager) Create(ctx context.Context, opts Options) (_ *Session, err error) {
	m.mu.Lock()
	maxSessions, idle, lifetime := m.cfg.MaxSessions, m.cfg.DefaultIdleTimeout, m.cfg.MaxLifetime
	switch {
	case m.closed:
		err = ErrClosed
	case m.live >= maxSessions:
		err = fmt.Errorf("%w (%d live)", ErrTooMany, m.live)
	default:
		m.live++
		m.wg.Add(1)
	}
	m.mu.Unlock()
	if err != nil {
		if opts.Release != nil {
			opts.Release()
		}
		return nil, err
	}
	defer func() {
		if err != nil {
			m.mu.Lock()
			m.live--
			m.mu.Unlock()
			m.wg.Done()
			if opts.Release != nil {
				opts.Release()
			}
		}
	}()
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = idle
	}
	if opts.IdleAction == "" {
		opts.IdleAction = IdleEnd
	}
	maxLife := lifetime
	if opts.Lifetime > 0 && opts.Lifetime < lifetime {
		lifetime = opts.Lifetime
	}
	opts.Lifetime = lifetime
	opts.Limits = opts.Limits.WithDefaults()
	limits := opts.Limits
	// The sandbox's own life limit is the longest the session may live, a
	// backstop: the life timer ends it at its lifetime, which SetLifetime
	// moves (a pooled sandbox's own limit is further still).
	limits.Timeout = maxLife
	limits.OutputBytes = m.cfg.OutputBytes
	id := opts.ID
	if id == "" {
		id = container.NewID()
	}
	r, pooled, err := m.start(ctx, id, opts, limits)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	r.LimitOutput(limits.OutputBytes)
	if opts.Home != "" {
		// Before the agent, which inherits it.
		if _, err := r.SetHome(ctx, opts.Home); err != nil {
			r.Kill(container.StatusError)
			return nil, fmt.Errorf("session %s: %w", id, err)
		}
	}
	var agent *procs.Agent
	if opts.Processes {
		if agent, err = r.StartAgent(ctx); err != nil {
			r.Kill(container.StatusError)
			return nil, fmt.Errorf("session %s: %w", id, err)
		}
		agent.LimitOutput(opts.CommandOutputBytes)
	}
	now := m.clock.Now()
	s := &Session{
		m: m, id: id, opts: opts, r: r, agent: agent, log: m.log.With("session", id), pooled: pooled,
		sem: make(chan struct{}, 1), state: StateIdle, created: now, lastUsed: now,
		maxLife: maxLife, expires: now.Add(lifetime),
	}
	s.armLifeTimer(lifetime)
	s.idleTimer = m.clock.AfterFunc(opts.IdleTimeout, s.expire)
	m.mu.Lock()
	m.sessions[id] = s
	closed := m.closed
	m.mu.Unlock()
	go s.watch()
	if closed { // Close ran while we started: end it too
		m.remove(id)
		s.die(runner.StatusKilled, "the daemon is shutting down")
		return nil, ErrClosed
	}
	s.log.Info("session created", "rootfs", opts.Rootfs, "idle_timeout", opts.IdleTimeout)
	return s, nil
}

// start takes a pooled runner for the session when one fits (and writes
// its input files), else starts one.
func (m *Manager) start(ctx context.Context, id string, opts Options, limits container.Limits) (*runner.Runner, bool, error) {
	if m.cfg.Take != nil && opts.BeforeStart == nil && len(opts.Mounts) == 0 && !opts.Init {
		if r := m.cfg.Take(opts); r != nil {
			ws := r.Sandbox().Workspace()
			for _, f := range opts.Files {
				if err := ws.WriteFile(f.Path, f.Data, f.Mode); err != nil {
					r.Kill(container.StatusError)
					return nil, false, err
				}
			}
			m.log.Debug("session takes a pooled runner", "session", id, "sandbox", r.Sandbox().ID())
			return r, true, nil
		}
	}
	r, err := runner.StartLang(ctx, m.cfg.Starter, container.Spec{
		ID:          id,
		RootfsDir:   opts.RootfsDir,
		Env:         opts.Env,
		Files:       opts.Files,
		Limits:      limits,
		BeforeStart: opts.BeforeStart,
		Mounts:      opts.Mounts,
		Init:        opts.Init,
	}, opts.Runner)
	return r, false, err
}

// ended is called once per session when its sandbox is gone.
// A dead session stays visible until its idle timer removes it.
func (m *Manager) ended(s *Session, st runner.Status) {
	m.mu.Lock()
	m.live--
	m.mu.Unlock()
	if m.cfg.OnEnd != nil {
		m.cfg.OnEnd(st)
	}
	m.wg.Done()
}

func (m *Manager) remove(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sessions, id)
}

// Get returns a session, live or dead (until deleted or expired).
func (m *Manager) Get(id string) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok {
		return nil, fmt.Errorf("session %q: %w", id, ErrNotFound)
	}
	return s, nil
}

// List describes every session, oldest first.
func (m *Manager) List() []Info {
	m.mu.Lock()
	ss := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		ss = append(ss, s)
	}
	m.mu.Unlock()
	out := make([]Info, 0, len(ss))
	for _, s := range ss {
		out = append(out, s.Info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// Live is the number of sessions whose sandbox is up.
func (m *Manager) Live() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live
}

// Delete ends a session at once (a running exec is killed with it) and
// forgets it.
func (m *Manager) Delete(id string) error {
	s, err := m.Get(id)
	if err != nil {
		return err
	}
	s.idleTimer.Stop()
	s.die(runner.StatusKilled, "deleted")
	m.remove(id) // after the teardown: a 404 means nothing is left
	return nil
}

// Close ends every session and waits until their sandboxes are torn down.
// Create fails with ErrClosed from then on.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	ss := make([]*Session, 0, len(m.sessions))
	for id, s := range m.sessions {
		s.idleTimer.Stop()
		ss = append(ss, s)
		delete(m.sessions, id)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.die(runner.StatusKilled, "the daemon is shutting down")
		}()
	}
	wg.Wait()
	m.wg.Wait()
}
