package container

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/cgroup"
	"github.com/nsbox/nsbox/container/internal/cleanup"
	"github.com/nsbox/nsbox/container/internal/output"
	"github.com/nsbox/nsbox/container/internal/runenv"
	"github.com/nsbox/nsbox/container/workspace"
)

// Sandbox is a started sandbox: its command is running (or has ended and
// not been waited for). Every Sandbox must be waited for: Wait is what tears
// it down.
type Sandbox struct {
	spec     Spec
	limits   Limits
	log      *slog.Logger
	proc     process
	ws       *Workspace
	cg       *cgroup.Cgroup
	teardown func()

	started time.Time
	stdout  *output.Capture
	stderr  *output.Capture
	readers sync.WaitGroup
	control *os.File
	timer   *time.Timer
	stopCtx func() bool

	mu       sync.Mutex
	verdict  Status // set when the engine ended the run
	killOnce sync.Once
	waitOnce sync.Once
	result   *Result
	waitErr  error
}

// ID is the sandbox's run id.
func (s *Sandbox) ID() string { return s.spec.ID }

// Pid is the host pid of the sandbox's main process.
func (s *Sandbox) Pid() int { return s.proc.pid() }

// Control is the engine's end of the control socket (fd 3 of the command)
// when the spec asked for one, else nil. It is closed by Wait.
func (s *Sandbox) Control() *os.File { return s.control }

// Workspace gives host-side access to /workspace while the sandbox lives.
func (s *Sandbox) Workspace() *Workspace { return s.ws }

// Pause freezes every process of the sandbox (its cgroup): they keep their
// memory and use no CPU until Resume. Kill works on a paused sandbox.
func (s *Sandbox) Pause() error { return s.cg.Freeze() }

// Resume thaws a paused sandbox.
func (s *Sandbox) Resume() error { return s.cg.Thaw() }

// Foreground gives a Spec.Background sandbox the CPU weight of every other
// sandbox: call it before the sandbox serves a run.
func (s *Sandbox) Foreground() error { return s.cg.Foreground() }

// Stats reads the sandbox's cgroup counters now.
func (s *Sandbox) Stats() (cgroup.Stats, error) { return s.cg.Stats() }

// Output returns what the command has written so far (capped) and the
// byte counts including what was cut.
func (s *Sandbox) Output() (stdout, stderr []byte, stdoutTotal, stderrTotal int64) {
	stdout, stdoutTotal, _ = s.stdout.Result()
	stderr, stderrTotal, _ = s.stderr.Result()
	return
}

// Signal sends sig to the sandbox's main process (pid 1 inside: it only
// receives signals it has a handler for, e.g. Python's SIGINT ->
// KeyboardInterrupt). Use Kill to end the sandbox.
func (s *Sandbox) Signal(sig syscall.Signal) error { return s.proc.signal(sig) }

// Done is closed when the sandbox's main process has exited (before Wait
// has collected the result).
func (s *Sandbox) Done() <-chan struct{} { return s.proc.done() }

// ZygoteLost reports whether the sandbox is a zygote's child whose zygote
// has died (killed, crashed or closed): the child dies with it, through no
// fault of the code it ran. The news of the zygote's death (its control
// socket's EOF) can trail the child's own by a moment, so it waits up to
// within for it. Any other sandbox: false at once.
func (s *Sandbox) ZygoteLost(within time.Duration) bool {
	c, ok := s.proc.(*zygoteChild)
	if !ok {
		return false
	}
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-c.z.Done():
		return true
	case <-t.C:
		return false
	}
}

// Kill ends the whole sandbox, every process in it, with the verdict v
// (StatusKilled, StatusTimeout, ...). The first verdict wins.
func (s *Sandbox) Kill(v Status) {
	s.mu.Lock()
	if s.verdict == "" {
		s.verdict = v
	}
	s.mu.Unlock()
	s.killOnce.Do(func() {
		if err := s.cg.Kill(); err != nil {
			s.log.Warn("kill sandbox", "err", err)
		}
	})
}

// Run executes spec in a fresh sandbox and returns its result once every
// process, cgroup and workspace of the run is gone. The error is non-nil
// (and the result nil) when the spec is invalid (ErrInvalidSpec) or the
// sandbox could not be set up; the run's own failures are verdicts in the
// Result. Cancelling ctx kills the sandbox (status "killed").
func (e *Engine) Run(ctx context.Context, spec Spec) (*Result, error) {
	sb, err := e.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return sb.Wait()
}

// Start spawns spec's command in a fresh sandbox and returns once the
// command has been exec'd. The deadline (Limits.Timeout) counts from here;
// cancelling ctx kills the sandbox. Call Wait to collect the result and tear
// the sandbox down.
func (e *Engine) Start(ctx context.Context, spec Spec) (*Sandbox, error) {
	if err := e.validate(&spec); err != nil {
		return nil, err
	}
	return e.start(ctx, spec, e.log, e.initProcesses(nil))
}

// start is the one construction path of a sandbox, whichever kind of
// process newProcess makes for it (an init, spare or cold, or a zygote's
// child): it decides the sandbox from the valid spec, gets the process,
// fills the workspace, launches the command and wires its output, limits
// and deadline.
func (e *Engine) start(ctx context.Context, spec Spec, log *slog.Logger, newProcess func(*description) (process, error)) (*Sandbox, error) {
	lim := spec.Limits.WithDefaults()
	env, err := runenv.Build(spec.Env, threads(lim.CPUs), lim.MemoryBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
	s := &Sandbox{spec: spec, limits: lim, log: log.With("run", spec.ID)}
	d := e.describe(&spec, lim, env)
	p, err := newProcess(d)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", spec.ID, err)
	}
	s.proc, s.cg = p, p.cgroup()
	cu := cleanup.Make(func() {
		s.Kill("") // Wait has killed it already, unless it never got that far
		p.destroy()
	})
	defer cu.Clean()
	s.started = time.Now()

	ws, err := workspace.New(lim.DiskBytes, p.owner(), p.owner())
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", spec.ID, err)
	}
	cu.Add(func() { ws.Close() })
	s.ws = &Workspace{ws}
	for _, f := range spec.Files {
		if err := s.ws.WriteFile(f.Path, f.Data, f.Mode); err != nil {
			return nil, fmt.Errorf("sandbox %s: %w", spec.ID, err)
		}
	}

	// pid 1's binary (Spec.Init) follows the workspace: the engine's.
	fds, err := e.reaper.Append([]*os.File{ws.Mount()}, spec.Init, e.cfg.RunDir)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", spec.ID, err)
	}
	// The mounts are the sandbox's once attached: the engine's fds go
	// when launch returns, whatever happened.
	mounts, err := e.openMounts(spec.Mounts, p.owner())
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", spec.ID, err)
	}
	var notFound *errCommandNotFound
	err = p.launch(d, append(fds, mounts...))
	for _, m := range mounts {
		m.Close()
	}
	if err != nil && !errors.As(err, &notFound) {
		return nil, fmt.Errorf("sandbox %s: %w", spec.ID, err)
	}
	outR, errR, inW, control := p.stdio()
	if spec.Control {
		s.control = control
	}
	s.startIO(outR, errR, inW)
	if notFound != nil {
		s.stderr.Write([]byte("nsbox: " + notFound.msg + "\n"))
	}
	s.arm(ctx)
	s.teardown = cu.Release()
	return s, nil
}

// startIO copies the command's output into the captures and feeds its
// stdin (closing inW at the end of it).
func (s *Sandbox) startIO(outR, errR, inW *os.File) {
	overflow := func() { s.Kill(StatusOutputLimit) }
	s.stdout = output.NewCapture(s.limits.OutputBytes, s.spec.Stdout, s.spec.StreamOutput, overflow)
	s.stderr = output.NewCapture(s.limits.OutputBytes, s.spec.Stderr, s.spec.StreamOutput, overflow)
	s.readers.Add(2)
	go func() { defer s.readers.Done(); io.Copy(s.stdout, outR) }()
	go func() { defer s.readers.Done(); io.Copy(s.stderr, errR) }()
	go feedStdin(inW, s.spec.Stdin)
}

// arm starts the run's deadline and ties it to ctx.
//
// The verdict is what the sandbox did, not when the engine looked: a timer
// that fires late (the daemon was stopped or starved) finds a main process
// that has already exited and leaves its verdict alone. The check is one
// waitid (or poll of the pidfd), and only when the deadline fires.
func (s *Sandbox) arm(ctx context.Context) {
	s.timer = time.AfterFunc(s.limits.Timeout, s.deadlinePassed)
	s.stopCtx = context.AfterFunc(ctx, func() { s.Kill(StatusKilled) })
}

func (s *Sandbox) deadlinePassed() {
	if !s.proc.hasExited() {
		s.Kill(StatusTimeout)
	}
}

// Wait waits for the command to end, kills whatever it left in the sandbox,
// collects the result and tears the sandbox down (cgroup, workspace, uid
// slot). It may be called more than once; later calls return the same.
func (s *Sandbox) Wait() (*Result, error) {
	s.waitOnce.Do(func() {
		s.result, s.waitErr = s.wait()
		s.teardown()
	})
	return s.result, s.waitErr
}

func (s *Sandbox) wait() (*Result, error) {
	ws, exited := s.proc.wait()
	wall := time.Since(s.started)
	s.timer.Stop()
	s.stopCtx()
	// The main process is gone; nothing else of the run may outlive it.
	s.Kill("")
	s.readers.Wait()

	res := &Result{ID: s.spec.ID, WallTime: wall}
	res.Stdout, res.StdoutBytes, res.StdoutTruncated = s.stdout.Result()
	res.Stderr, res.StderrBytes, res.StderrTruncated = s.stderr.Result()
	st, err := s.cg.Stats()
	if err != nil {
		s.log.Warn("cgroup stats", "err", err)
	}
	res.CPUTime = st.CPUUsage
	res.MemoryPeakBytes = st.MemoryPeakBytes

	s.mu.Lock()
	verdict := s.verdict
	s.mu.Unlock()
	res.ExitCode, res.Signal = exitStatus(ws)
	if !exited {
		res.ExitCode = -1
	}
	switch {
	case verdict == StatusTimeout && st.OOMKills > 0:
		res.Status = StatusOOM
	case verdict != "":
		res.Status = verdict
	case st.OOMKills > 0 && res.ExitCode != 0:
		res.Status = StatusOOM
	case res.Signal != "":
		res.Status = StatusKilled
	case res.ExitCode != 0:
		res.Status = StatusExitNonzero
	default:
		res.Status = StatusOK
	}

	inputs := make(map[string]string, len(s.spec.Files))
	for _, f := range s.spec.Files {
		sum := sha256.Sum256(f.Data)
		inputs[f.Path] = hex.EncodeToString(sum[:])
	}
	res.Files, res.FilesTruncated, err = s.ws.Collect(inputs, s.spec.ReturnFiles)
	if err != nil {
		s.log.Warn("list workspace files", "err", err)
	}
	s.log.Debug("run finished", "status", res.Status, "exit", res.ExitCode, "wall", wall)
	return res, nil
}

// feedStdin copies the caller's stdin into the sandbox and closes the pipe
// so the command sees EOF. A nil reader gives an immediate EOF.
func feedStdin(w *os.File, r io.Reader) {
	defer w.Close()
	if r != nil {
		io.Copy(w, r)
	}
}

func exitStatus(ws syscall.WaitStatus) (code int, signal string) {
	if ws.Signaled() {
		return 128 + int(ws.Signal()), unix.SignalName(ws.Signal())
	}
	return ws.ExitStatus(), ""
}
