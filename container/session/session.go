package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/clock"
	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/container/runner"
)

// State is a session's state.
type State string

// Session states.
const (
	StateIdle   State = "idle"   // alive, no exec running
	StateBusy   State = "busy"   // an exec is running
	StatePaused State = "paused" // frozen: its processes keep their memory and use no CPU
	StateDead   State = "dead"   // its sandbox is gone; DeadReason says why
)

// What a session does when its idle timeout passes.
const (
	IdleEnd   = "end"   // it ends (the default)
	IdlePause = "pause" // it is paused, and lives on until its lifetime ends
	IdlePark  = "park"  // Config.Park parks it (on disk, no sandbox); ended if that fails
)

// Options describe a new session.
type Options struct {
	// ID names the session; empty: a fresh container.NewID().
	ID string
	// Init is container.Spec.Init: the runner is pid 1's child. Such a
	// session never takes a pooled runner.
	Init bool
	// Rootfs names the rootfs (for Info); RootfsDir is its tree.
	Rootfs    string
	RootfsDir string
	// Release, when set, is called once the session's sandbox is gone.
	Release func()
	// Limits hold for the session's whole life, except Timeout, the default
	// timeout of one exec, and OutputBytes, the cap of one exec's output
	// per stream (past it the exec is interrupted: output_limit).
	Limits container.Limits
	// IdleTimeout ends the session after that long without an exec or a
	// file operation (0: the Manager's default).
	IdleTimeout time.Duration
	Env         []string
	Files       []container.File
	// Owner is the uid of the session's creator, for Info; -1: none.
	Owner int64
	// Lifetime ends the session that long after its creation (0, or more
	// than the Manager's MaxLifetime: MaxLifetime); SetLifetime moves the
	// end.
	Lifetime time.Duration
	// AllowedImports binds every exec (runner.ExecRequest.AllowedImports).
	AllowedImports []string
	// IdleAction is IdleEnd (or empty), IdlePause or IdlePark.
	IdleAction string
	// LifetimeAction is what the end of the lifetime does: IdleEnd (or
	// empty) ends the session, IdlePark parks it through Config.Park
	// (waiting for a running exec; ended if the park fails).
	LifetimeAction string
	// NoIdleEnd: the session ends only at its lifetime (an E2B sandbox),
	// never at an idle timeout, whatever IdleAction says; IdleTimeout then
	// only says how long a dead session stays listed.
	NoIdleEnd bool
	// BeforeStart is the sandbox's container.Spec.BeforeStart; a session
	// with one never takes a pooled runner.
	BeforeStart func(pid int) error
	// Mounts are the sandbox's container.Spec.Mounts (volumes, datasets);
	// a session with any never takes a pooled runner: a pooled sandbox's
	// mounts were made before the session asked.
	Mounts []container.Mount
	// Language names the session's language as its creator knows it
	// (daemon/lang); the session only reports it.
	Language string
	// Runner is the kind of the session's interpreter (zero: Python).
	Runner runner.Language
	// Transform is applied to every cell (runner.StripTypes: a
	// TypeScript session).
	Transform runner.Transform
	// Origin is what the session was made from, kept for its creator (the
	// daemon re-creates a session from it for a fork or a revive); the
	// session never reads it.
	Origin any
	// Processes starts the sandbox's process agent with the session
	// (Session.Procs): commands run beside the interpreter, in the same
	// sandbox, and end with it.
	Processes bool
	// Home is the interpreter's working directory and $HOME, and so its
	// process agent's and its commands' (runner.SetHome); "" keeps the
	// sandbox's, /workspace. E2B sandboxes' is /home/user.
	Home string
	// CommandOutputBytes caps each command's output per stream
	// (procs.Agent.LimitOutput; 0: procs.DefaultOutputBytes).
	CommandOutputBytes int64
}

// Info describes a session.
type Info struct {
	ID          string
	Rootfs      string
	Language    string          // Options.Language
	Runner      runner.Language // Options.Runner
	State       State
	DeadReason  string // why it died, for StateDead
	DeadStatus  runner.Status
	Created     time.Time
	LastUsed    time.Time
	ExecCount   int
	IdleTimeout time.Duration
	Limits      container.Limits
	// Pooled: the session took a runner from the warm pool.
	Pooled bool
	Owner  int64 // Options.Owner
	// Expires is when the session's lifetime ends (SetLifetime moves it).
	Expires        time.Time
	NoIdleEnd      bool     // Options.NoIdleEnd
	AllowedImports []string // Options.AllowedImports
	IdleAction     string   // Options.IdleAction, filled
	LifetimeAction string   // Options.LifetimeAction
	// Lifetime is the lifetime it was given (Options.Lifetime, filled).
	Lifetime time.Duration
	// Paused is when the session was paused, for StatePaused.
	Paused time.Time
	// Processes: the session has a process agent (Options.Processes).
	Processes bool
}

// Session is one live (or dead, not yet removed) session.
type Session struct {
	m    *Manager
	id   string
	opts Options
	r    *runner.Runner
	// agent is the process agent, with Options.Processes.
	agent *procs.Agent
	log   *slog.Logger
	// pooled: r came from the warm pool.
	pooled bool
	// maxLife bounds the session's life from its creation (the Manager's
	// MaxLifetime then); lifeTimer ends it at expires (lifetime.go).
	maxLife   time.Duration
	lifeTimer clock.Timer

	sem chan struct{} // one exec at a time; file operations do not take it (files_linux.go)

	mu        sync.Mutex
	state     State
	deadWhy   string
	deadSt    runner.Status
	created   time.Time
	lastUsed  time.Time
	holds     int // Hold: open terminals, in use however long they are quiet
	execs     int
	idleTimer clock.Timer
	ended     bool
	paused    time.Time // when it was paused, while StatePaused
	expires   time.Time // when its lifetime ends
}

// ID is the session's id.
func (s *Session) ID() string { return s.id }

// Sandbox is the session's sandbox (for its network namespace: the
// daemon's connections to its ports).
func (s *Session) Sandbox() *container.Sandbox { return s.r.Sandbox() }

// Hold marks the session in use until the returned release is called
// (once; later calls do nothing): its idle timeout does not pass
// meanwhile, and starts again at the release. A terminal holds its
// session while it is open: a user at a shell types no execs. Its
// lifetime still ends it.
func (s *Session) Hold() (release func()) {
	s.mu.Lock()
	s.holds++
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.holds--
			s.lastUsed = s.m.clock.Now()
			s.mu.Unlock()
		})
	}
}

// Info describes the session now.
func (s *Session) Info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Info{
		ID: s.id, Rootfs: s.opts.Rootfs, Language: s.opts.Language, Runner: s.opts.Runner, State: s.state, DeadReason: s.deadWhy, DeadStatus: s.deadSt,
		Created: s.created, LastUsed: s.lastUsed, ExecCount: s.execs,
		IdleTimeout: s.opts.IdleTimeout, Limits: s.opts.Limits, Pooled: s.pooled, Owner: s.opts.Owner,
		Expires: s.expires, NoIdleEnd: s.opts.NoIdleEnd, AllowedImports: s.opts.AllowedImports,
		IdleAction: s.opts.IdleAction, Paused: s.paused, Processes: s.agent != nil,
		LifetimeAction: s.opts.LifetimeAction, Lifetime: s.opts.Lifetime,
	}
}

// ExecResult is one exec's result and the workspace files it created or
// changed.
type ExecResult struct {
	*runner.Result
	Files []container.FileInfo
	// FilesTruncated says the workspace had more entries than a listing
	// holds (workspace.MaxListed): changed files may be missing.
	FilesTruncated bool
}

// acquire takes the session for one operation; it fails when the session
// is dead or ctx ends first.
func (s *Session) acquire(ctx context.Context) error {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == StateDead {
		<-s.sem
		return fmt.Errorf("session %s: %w: %s", s.id, ErrDead, s.deadWhy)
	}
	return nil
}

func (s *Session) release() {
	s.mu.Lock()
	s.lastUsed = s.m.clock.Now()
	if s.state == StateBusy {
		s.state = StateIdle
	}
	s.mu.Unlock()
	<-s.sem
}

// Exec runs code in the session. A zero req.Timeout takes the session's
// exec timeout, a zero OutputBytes its output cap. When the cell kills the
// sandbox (OOM, crash, a cell that ignored its interrupt) the result says
// so and the session is dead from then on.
func (s *Session) Exec(ctx context.Context, req runner.ExecRequest) (*ExecResult, error) {
	if err := s.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.release()
	if err := s.resumeHeld(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.state = StateBusy
	s.execs++
	s.mu.Unlock()
	if req.Timeout <= 0 {
		req.Timeout = s.opts.Limits.Timeout
	}
	if req.OutputBytes <= 0 {
		req.OutputBytes = s.opts.Limits.OutputBytes
	}
	if req.AllowedImports == nil {
		req.AllowedImports = s.opts.AllowedImports
	}
	req.Transform = s.opts.Transform
	ws := s.r.Sandbox().Workspace()
	before, err := ws.Snapshot()
	if err != nil {
		s.log.Warn("workspace snapshot", "err", err)
	}
	res, err := s.r.Exec(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", s.id, err)
	}
	out := &ExecResult{Result: res}
	if before != nil {
		if out.Files, out.FilesTruncated, err = ws.Changed(before, nil); err != nil {
			s.log.Warn("workspace changes", "err", err)
		}
	}
	if st, why := s.r.Dead(); st != "" {
		s.die(st, why)
	}
	return out, nil
}

// DropContext forgets the named context of the session's interpreter
// (runner.Runner.DropContext): its next exec starts fresh. It waits for a
// running exec, like Exec.
func (s *Session) DropContext(ctx context.Context, id string) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	if err := s.resumeHeld(); err != nil {
		return err
	}
	if err := s.r.DropContext(ctx, id); err != nil {
		return fmt.Errorf("session %s: %w", s.id, err)
	}
	return nil
}

// Procs is the session's process agent: ErrNoProcesses when the session
// was created without Options.Processes, ErrDead once it ended (the
// agent's calls then fail with procs.ErrClosed). The agent's calls do not
// wait for an exec, do not resume a paused session (they wait until it
// is resumed) and do not count as use for the idle timeout.
func (s *Session) Procs() (*procs.Agent, error) {
	if s.agent == nil {
		return nil, fmt.Errorf("session %s: %w", s.id, ErrNoProcesses)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == StateDead {
		return nil, fmt.Errorf("session %s: %w: %s", s.id, ErrDead, s.deadWhy)
	}
	return s.agent, nil
}

// Pause freezes the session's sandbox: its interpreter and whatever it
// started keep their memory and use no CPU until Resume or the next exec.
// A session running an exec is not paused (ErrBusy); pausing a paused one
// changes nothing.
func (s *Session) Pause() error {
	select {
	case s.sem <- struct{}{}:
	default:
		return fmt.Errorf("session %s: %w", s.id, ErrBusy)
	}
	defer func() { <-s.sem }()
	return s.pauseHeld()
}

// pauseHeld pauses the session; the caller holds s.sem.
func (s *Session) pauseHeld() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case StateDead:
		return fmt.Errorf("session %s: %w: %s", s.id, ErrDead, s.deadWhy)
	case StatePaused:
		return nil
	}
	if err := s.r.Sandbox().Pause(); err != nil {
		return fmt.Errorf("session %s: pause: %w", s.id, err)
	}
	s.state, s.paused = StatePaused, s.m.clock.Now()
	s.log.Info("session paused")
	return nil
}

// Resume thaws a paused session (a session that is not paused is left as
// it is). It waits for an operation that holds the session.
func (s *Session) Resume(ctx context.Context) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	return s.resumeHeld()
}

// resumeHeld thaws the session if it is paused; the caller holds s.sem.
func (s *Session) resumeHeld() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != StatePaused {
		return nil
	}
	if err := s.r.Sandbox().Resume(); err != nil {
		return fmt.Errorf("session %s: resume: %w", s.id, err)
	}
	s.log.Info("session resumed", "paused_for", s.m.clock.Now().Sub(s.paused))
	s.state, s.paused = StateIdle, time.Time{}
	return nil
}

// die marks the session dead and tears its sandbox down (once).
func (s *Session) die(st runner.Status, why string) {
	s.mu.Lock()
	wasPaused := s.state == StatePaused
	if s.state != StateDead {
		s.state, s.deadSt, s.deadWhy = StateDead, st, why
	}
	ended := s.ended
	s.ended = true
	s.mu.Unlock()
	if ended {
		return
	}
	if wasPaused { // let the interpreter see its end: a frozen one would hold the teardown
		_ = s.r.Sandbox().Resume()
	}
	s.stopLifeTimer()
	res, err := s.r.Kill(container.StatusKilled)
	if s.agent != nil { // its processes died with the sandbox
		s.agent.Close()
	}
	if s.opts.Release != nil {
		s.opts.Release()
	}
	attrs := []any{"status", st, "reason", why}
	if res != nil {
		attrs = append(attrs, "memory_peak_bytes", res.MemoryPeakBytes, "cpu", res.CPUTime)
	}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	s.log.Info("session ended", attrs...)
	s.m.ended(s, st)
}

// watch marks the session dead when its sandbox ends on its own while no
// exec runs (a lifetime deadline, a background process's OOM).
func (s *Session) watch() {
	<-s.r.Sandbox().Done()
	s.sem <- struct{}{}
	defer func() { <-s.sem }()
	st, why := s.r.Dead()
	if st == "" {
		st, why = runner.StatusCrashed, "the session's sandbox ended (its lifetime limit, or the interpreter exited)"
		if stats, err := s.r.Sandbox().Stats(); err == nil && stats.OOMKills > 0 {
			st, why = runner.StatusOOM, "the sandbox ran out of memory (its memory limit); the interpreter was killed"
		}
	}
	s.die(st, why)
}

// expire runs when the idle timer fires: it ends the session if it has
// been idle for its whole idle timeout, else re-arms the timer.
func (s *Session) expire() {
	select {
	case s.sem <- struct{}{}:
	default: // an exec or file operation runs
		s.idleTimer.Reset(s.opts.IdleTimeout)
		return
	}
	s.mu.Lock()
	idle := s.m.clock.Now().Sub(s.lastUsed)
	if s.state == StateDead { // kept for GET until now
		s.mu.Unlock()
		s.m.remove(s.id)
		<-s.sem
		return
	}
	if idle < s.opts.IdleTimeout || s.holds > 0 || s.state == StatePaused || s.opts.NoIdleEnd {
		next := max(s.opts.IdleTimeout-idle, time.Second)
		if s.opts.NoIdleEnd || s.holds > 0 { // the timer only forgets it once it is dead; a hold is released later
			next = s.opts.IdleTimeout
		}
		s.idleTimer.Reset(next)
		s.mu.Unlock()
		<-s.sem
		return
	}
	s.mu.Unlock()
	if s.opts.IdleAction == IdlePark && s.m.cfg.Park != nil {
		<-s.sem // the park takes the session itself
		err := s.m.cfg.Park(s)
		if err == nil {
			return
		}
		if errors.Is(err, ErrBusy) { // an exec came first: idle no more
			s.idleTimer.Reset(s.opts.IdleTimeout)
			return
		}
		s.log.Warn("idle session: park failed, ending it", "err", err)
		s.sem <- struct{}{}
	}
	if s.opts.IdleAction == IdlePause {
		// Paused, it lives on until its lifetime ends; the timer keeps
		// running to forget it once it is dead.
		if err := s.pauseHeld(); err != nil {
			s.log.Warn("idle session: pause failed, ending it", "err", err)
		} else {
			s.idleTimer.Reset(s.opts.IdleTimeout)
			<-s.sem
			return
		}
	}
	s.log.Info("session idle: expiring", "idle", idle)
	// Forget it only once its sandbox is gone: a 404 means nothing is left.
	s.die(runner.StatusKilled, "expired after "+s.opts.IdleTimeout.String()+" idle")
	s.m.remove(s.id)
	<-s.sem
}
