package container

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/cgroup"
	"github.com/nsbox/nsbox/container/sandboxinit"
)

// Sandbox is a started sandbox: its command is running (or has ended and
// not been waited for). Every Sandbox must be waited for: Wait is what tears
// it down.
type Sandbox struct {
	spec    Spec
	limits  Limits
	log     *slog.Logger
	p       *proc
	ws      *Workspace
	cg      *cgroup.Cgroup
	cleanup []func()

	cmd     *exec.Cmd
	zc      *zygoteChild // a zygote's child, instead of cmd
	zygote  *zygoteBlock // this sandbox is a zygote, with this id block
	spare   bool         // the run took a spare init
	started time.Time
	stdout  *capture
	stderr  *capture
	readers sync.WaitGroup
	control *os.File
	timer   *time.Timer
	stopCtx func() bool

	mu       sync.Mutex
	verdict  Status // set when the engine ended the run
	killOnce sync.Once
	waitOnce sync.Once
	done     chan struct{}
	result   *Result
	waitErr  error
}

// ID is the sandbox's run id.
func (s *Sandbox) ID() string { return s.spec.ID }

// Pid is the host pid of the sandbox's main process.
func (s *Sandbox) Pid() int {
	if s.zc != nil {
		return s.zc.pid
	}
	return s.cmd.Process.Pid
}

// Control is the engine's end of the control socket (fd 3 of the command)
// when the spec asked for one, else nil. It is closed by Wait.
func (s *Sandbox) Control() *os.File { return s.control }

// Workspace gives host-side access to /workspace while the sandbox lives.
func (s *Sandbox) Workspace() *Workspace { return s.ws }

// Stats reads the sandbox's cgroup counters now.
func (s *Sandbox) Stats() (cgroup.Stats, error) { return s.cg.Stats() }

// Output returns what the command has written so far (capped) and the
// byte counts including what was cut.
func (s *Sandbox) Output() (stdout, stderr []byte, stdoutTotal, stderrTotal int64) {
	stdout, stdoutTotal, _ = s.stdout.result()
	stderr, stderrTotal, _ = s.stderr.result()
	return
}

// Signal sends sig to the sandbox's main process (pid 1 inside: it only
// receives signals it has a handler for, e.g. Python's SIGINT ->
// KeyboardInterrupt). Use Kill to end the sandbox.
func (s *Sandbox) Signal(sig syscall.Signal) error {
	if s.zc != nil {
		return s.zc.signal(sig)
	}
	return s.cmd.Process.Signal(sig)
}

// Done is closed when the sandbox's main process has exited (before Wait
// has collected the result).
func (s *Sandbox) Done() <-chan struct{} { return s.done }

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

func (s *Sandbox) teardown() {
	for i := len(s.cleanup) - 1; i >= 0; i-- {
		s.cleanup[i]()
	}
	s.cleanup = nil
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
	return e.start(ctx, spec, nil)
}

// start is Start; with zb set the sandbox is a zygote's (newProc).
func (e *Engine) start(ctx context.Context, spec Spec, zb *zygoteBlock) (_ *Sandbox, err error) {
	if err := e.validate(&spec); err != nil {
		return nil, err
	}
	s := &Sandbox{spec: spec, limits: spec.Limits.WithDefaults(), log: e.log.With("run", spec.ID), done: make(chan struct{}), zygote: zb}
	defer func() {
		if err != nil {
			s.teardown()
		}
	}()
	env, err := buildEnv(spec.Env, s.limits.CPUs)
	if err != nil {
		return nil, err
	}
	if err := e.spawn(ctx, s, env); err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", spec.ID, err)
	}
	return s, nil
}

// proc returns a spare init with the run's limits, or a new one (cold).
func (e *Engine) proc(s *Sandbox) (*proc, error) {
	lim := cgroup.Limits{MemoryBytes: s.limits.MemoryBytes, Pids: s.limits.Pids, CPUs: s.limits.CPUs}
	if e.spares != nil && s.zygote == nil {
		if p := e.spares.take(); p != nil {
			if p.limits == lim {
				s.spare = true
				return p, nil
			}
			if err := p.cg.SetLimits(lim); err == nil {
				p.limits = lim
				s.spare = true
				return p, nil
			}
			p.destroy()
		}
	}
	return e.newProc(s.spec.ID, lim, s.zygote)
}

func (e *Engine) initConfig(s *Sandbox, env []string) sandboxinit.Config {
	prog := s.spec.Seccomp
	if prog == nil {
		prog = e.cfg.Seccomp
	}
	masked, ro, fsize := e.masked, e.ro, uint64(s.limits.DiskBytes)
	if s.zygote != nil {
		// Children mount their own /proc, which the kernel allows only
		// where a fully visible one exists; they apply the masks and the
		// filter themselves, and set their own (lower) file size limit.
		masked, ro, prog, fsize = nil, nil, nil, unix.RLIM_INFINITY
	}
	return sandboxinit.Config{
		Rootfs:     s.spec.RootfsDir,
		Argv:       s.spec.Argv,
		Env:        env,
		Hostname:   "sandbox",
		TmpBytes:   s.limits.DiskBytes,
		NoFile:     1024,
		FSizeBytes: fsize,
		UID:        SandboxUID,
		GID:        SandboxGID,
		Masked:     masked,
		ReadOnly:   ro,
		Seccomp:    prog,
		CgroupNS:   s.cg.CloneFD() < 0,
		Control:    s.spec.Control,
		Zygote:     s.zygote != nil,
	}
}

// spawn gets an init (spare or new), gives it the workspace and its config,
// makes sure it sits in its cgroup, and returns once the user's command has
// been exec'd.
func (e *Engine) spawn(ctx context.Context, s *Sandbox, env []string) error {
	p, err := e.proc(s)
	if err != nil {
		return err
	}
	s.p, s.cg, s.cmd = p, p.cg, p.cmd
	s.cleanup = append(s.cleanup, p.destroy)
	s.started = time.Now()

	ws, err := newWorkspace(s.limits.DiskBytes, p.owner, p.owner)
	if err != nil {
		return err
	}
	s.ws = ws
	s.cleanup = append(s.cleanup, func() { ws.close() })
	for _, f := range s.spec.Files {
		if err := ws.WriteFile(f.Path, f.Data, f.Mode); err != nil {
			return err
		}
	}

	// A cold init builds its mounts while we place it in its cgroup.
	cfg, err := json.Marshal(e.initConfig(s, env))
	if err != nil {
		return err
	}
	if err := p.send(cfg, ws.mnt); err != nil {
		return e.initFailed(s, err)
	}
	if err := p.place(); err != nil {
		return err
	}
	if _, err := p.syncW.Write([]byte{1}); err != nil {
		return e.initFailed(s, err)
	}

	if s.spec.Control {
		s.control = p.control
	}
	inW := p.inW
	p.inW = nil // feedStdin closes it
	s.startIO(p.outR, p.errOutR, inW)

	// EOF on the error pipe without a message means the exec happened.
	initMsg, _ := io.ReadAll(p.errR)
	if len(initMsg) > 0 {
		msg := string(bytes.TrimSpace(initMsg))
		if !strings.Contains(msg, "command not found") {
			s.Kill(StatusError)
			s.cmd.Wait()
			s.readers.Wait()
			return fmt.Errorf("sandbox init: %s", msg)
		}
		// Like a shell: the run happened, the command did not exist.
		s.stderr.Write([]byte("nsbox: " + msg + "\n"))
	}
	s.arm(ctx)
	go func() {
		// Wait on the process without reaping it, so Done fires even
		// before anyone calls Wait.
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, s.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err != unix.EINTR {
				break
			}
		}
		close(s.done)
	}()
	return nil
}

// startIO copies the command's output into the captures and feeds its
// stdin (closing inW at the end of it).
func (s *Sandbox) startIO(outR, errR, inW *os.File) {
	s.stdout = &capture{limit: s.limits.OutputBytes, live: s.spec.Stdout, stream: s.spec.StreamOutput, onOverflow: func() { s.Kill(StatusOutputLimit) }}
	s.stderr = &capture{limit: s.limits.OutputBytes, live: s.spec.Stderr, stream: s.spec.StreamOutput, onOverflow: func() { s.Kill(StatusOutputLimit) }}
	s.readers.Add(2)
	go func() { defer s.readers.Done(); io.Copy(s.stdout, outR) }()
	go func() { defer s.readers.Done(); io.Copy(s.stderr, errR) }()
	go feedStdin(inW, s.spec.Stdin)
}

// arm starts the run's deadline and ties it to ctx.
func (s *Sandbox) arm(ctx context.Context) {
	s.timer = time.AfterFunc(s.limits.Timeout, func() { s.Kill(StatusTimeout) })
	s.stopCtx = context.AfterFunc(ctx, func() { s.Kill(StatusKilled) })
}

// initFailed explains a dead init by its own error message when it left one.
func (e *Engine) initFailed(s *Sandbox, err error) error {
	s.Kill(StatusError)
	s.cmd.Wait()
	if msg, _ := io.ReadAll(s.p.errR); len(msg) > 0 {
		return fmt.Errorf("sandbox init: %s", bytes.TrimSpace(msg))
	}
	return err
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
	var ws syscall.WaitStatus
	exited := true
	if s.zc != nil {
		<-s.done
		ws = s.zc.waitStatus()
	} else {
		s.cmd.Wait()
		exited = false
		if ps := s.cmd.ProcessState; ps != nil {
			ws, exited = ps.Sys().(syscall.WaitStatus)
		}
	}
	wall := time.Since(s.started)
	s.timer.Stop()
	s.stopCtx()
	// The main process is gone; nothing else of the run may outlive it.
	s.Kill("")
	s.readers.Wait()

	res := &Result{ID: s.spec.ID, WallTime: wall}
	res.Stdout, res.StdoutBytes, res.StdoutTruncated = s.stdout.result()
	res.Stderr, res.StderrBytes, res.StderrTruncated = s.stderr.result()
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
	files, err := s.ws.collect(inputs, s.spec.ReturnFiles)
	if err != nil {
		s.log.Warn("list workspace files", "err", err)
	}
	res.Files = files
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
