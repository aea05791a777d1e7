package container

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/cgroup"
	"github.com/nsbox/nsbox/container/internal/frame"
)

//go:embed zygote.py
var zygoteSource string

// zygoteBootstrap runs zygote.py (argv[2]) in a module of its own; argv[1]
// is its JSON config.
const zygoteBootstrap = "import sys; exec(compile(sys.argv[2], '<nsbox-zygote>', 'exec'), {'__name__': '_nsbox_zygote'})"

// Bounds on a zygote's exchanges with the engine.
const (
	// zygoteSetupTimeout bounds a child's way from fork to verified.
	zygoteSetupTimeout = 10 * time.Second
	// zygoteExitWait bounds the wait for a killed child's exit report.
	zygoteExitWait = 5 * time.Second
	maxZygoteFrame = 1 << 20
)

// ZygoteConfig describes a zygote: a Python interpreter in a sandbox of its
// own that imports Modules once and then forks a child per run.
type ZygoteConfig struct {
	// ID names the zygote's sandbox (cgroup, logs). Empty: generated.
	ID string
	// RootfsDir is the rootfs of the zygote and of every child.
	RootfsDir string
	// Modules are imported once, in the zygote. Those that fail to import
	// are skipped (Zygote.Skipped).
	Modules []string
	// Prelude is Python run once in the zygote after the imports, as module
	// _nsbox_prelude (e.g. to warm a cache). It is the operator's code and
	// must never come from a run: every child inherits what it leaves.
	Prelude string
	// Env holds extra KEY=VALUE pairs for the zygote's own imports (e.g. a
	// matplotlib backend). Children get their run's environment instead.
	// The zygote's numeric libraries always start single-threaded.
	Env []string
	// MemoryBytes bounds the zygote's own cgroup: its imports plus the
	// page tables of children being cloned. 0: 2 GiB.
	MemoryBytes int64
	// Children is the most children alive at once. 0: 64; at most
	// MaxZygoteChildren.
	Children int
	// HugePages backs the zygote's heap with transparent huge pages after
	// the imports (madvise, then MADV_COLLAPSE): a fork copies, and an exit
	// frees, one page-table entry per 2 MiB instead of 512. Measured here:
	// fork 6.8 -> 5.0 ms p50. It costs ~0.1 s once and some memory.
	HugePages bool
	// StartTimeout bounds the zygote's imports. 0: 2 minutes.
	StartTimeout time.Duration
}

// Zygote is a started zygote. Its Start forks a sandboxed child for one
// run: the child gets fresh user, mount, pid, net, ipc, uts and cgroup
// namespaces, its own /proc, /tmp, /dev/shm and /workspace, its own cgroup
// with the run's limits, a host uid of its own, no capabilities,
// no_new_privs and the seccomp filter, all of which the engine verifies
// from the host before the child runs anything. It is safe for concurrent
// use; forks are serialised.
type Zygote struct {
	e       *Engine
	cfg     ZygoteConfig
	log     *slog.Logger
	sb      *Sandbox
	block   *zygoteBlock
	ctl     *os.File
	skipped []string
	ns      map[string]string // the zygote's namespaces ("net:[4026…]")
	hostNS  map[string]string // the engine's own

	forkMu sync.Mutex // one fork request at a time

	mu       sync.Mutex
	free     []int                // free child slots
	children map[int]*zygoteChild // by pid in the zygote's pid namespace
	pending  *zygoteChild         // the fork in flight
	replies  chan zygoteReply     // replies to fork requests
	dead     chan struct{}        // closed when the zygote is gone
	deadOnce sync.Once

	forks    atomic.Uint64
	closing  atomic.Bool
	lastWarm atomic.Int64 // unix nanoseconds of the last warmMigration

	// testSkip names a step children are told to skip (tests of the
	// verification only).
	testSkip string
}

// zygoteRun is what the verified child runs, sent to it directly.
type zygoteRun struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
}

// zygoteReply is a frame from the zygote.
type zygoteReply struct {
	Ready   bool     `json:"ready"`
	Skipped []string `json:"skipped"`
	Threads int      `json:"threads"`
	Forked  *int     `json:"forked"`
	Error   string   `json:"error"`
	Exit    *int     `json:"exit"`
	Status  int      `json:"status"`
}

// zygoteRequest is a fork request: everything the child applies to
// itself, decided here.
// It carries no run's code or data: those go to the child (zygoteRun)
// once it is verified.
type zygoteRequest struct {
	Slot     int      `json:"slot"`
	Hostname string   `json:"hostname"`
	TmpBytes int64    `json:"tmp_bytes"`
	NoFile   uint64   `json:"nofile"`
	FSize    uint64   `json:"fsize"`
	UID      int      `json:"uid"`
	GID      int      `json:"gid"`
	Masked   []string `json:"masked"`
	ReadOnly []string `json:"read_only"`
	Seccomp  []byte   `json:"seccomp"` // base64 in JSON
	CgroupNS bool     `json:"cgroupns"`
	Threads  int      `json:"threads"`
	Control  bool     `json:"control"`
	TestSkip string   `json:"test_skip,omitempty"`
}

// StartZygote starts a zygote and returns once it has imported its modules
// and waits for fork requests.
func (e *Engine) StartZygote(ctx context.Context, cfg ZygoteConfig) (_ *Zygote, err error) {
	if cfg.ID == "" {
		cfg.ID = "zy-" + NewID()
	}
	if cfg.MemoryBytes == 0 {
		cfg.MemoryBytes = 2 << 30
	}
	if cfg.Children == 0 {
		cfg.Children = 64
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 2 * time.Minute
	}
	if cfg.Children < 1 || cfg.Children > MaxZygoteChildren {
		return nil, fmt.Errorf("%w: zygote children %d: want 1-%d", ErrInvalidSpec, cfg.Children, MaxZygoteChildren)
	}
	for _, m := range cfg.Modules {
		if m == "" || strings.ContainsAny(m, " \t\n\x00/") {
			return nil, fmt.Errorf("%w: zygote module %q is not a module name", ErrInvalidSpec, m)
		}
	}
	zcfg, err := json.Marshal(map[string]any{"modules": cfg.Modules, "prelude": cfg.Prelude, "huge_pages": cfg.HugePages, "slots": cfg.Children, "user_id": SandboxUID})
	if err != nil {
		return nil, err
	}
	z := &Zygote{
		e: e, cfg: cfg, log: e.log.With("zygote", cfg.ID),
		children: map[int]*zygoteChild{}, replies: make(chan zygoteReply, 1), dead: make(chan struct{}),
	}
	for i := range cfg.Children {
		z.free = append(z.free, i)
	}
	if z.block, err = e.uids.acquireZygoteBlock(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			z.block.release()
		}
	}()
	// The zygote's numeric libraries stay single-threaded, so that a raw
	// clone of it is safe; each child sets its own thread count.
	env := append(slices.Clone(cfg.Env), "OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1", "NUMEXPR_NUM_THREADS=1")
	out := &logWriter{log: z.log}
	spec := Spec{
		ID:        cfg.ID,
		RootfsDir: cfg.RootfsDir,
		Argv:      []string{"python3", "-I", "-c", zygoteBootstrap, string(zcfg), zygoteSource},
		Env:       env,
		Limits: Limits{
			Timeout:     math.MaxInt64,
			MemoryBytes: cfg.MemoryBytes,
			Pids:        int64(cfg.Children) + 16,
			CPUs:        float64(runtime.NumCPU()),
			DiskBytes:   1 << 20,
		},
		Control:      true,
		StreamOutput: true,
		Stdout:       out,
		Stderr:       out,
	}
	sb, err := e.start(context.WithoutCancel(ctx), spec, z.block)
	if err != nil {
		return nil, fmt.Errorf("zygote: %w", err)
	}
	z.sb, z.ctl = sb, sb.Control()
	ready := make(chan error, 1)
	go func() {
		var r zygoteReply
		err := readZygoteFrame(z.ctl, &r)
		if err == nil && !r.Ready {
			err = errors.New("no ready frame")
		}
		z.skipped = r.Skipped
		if err == nil && r.Threads != 1 {
			err = fmt.Errorf("the zygote has %d threads after its imports; it must have one", r.Threads)
		}
		ready <- err
	}()
	timer := time.NewTimer(cfg.StartTimeout)
	defer timer.Stop()
	select {
	case err = <-ready:
	case <-timer.C:
		err = fmt.Errorf("imports took longer than %s", cfg.StartTimeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err == nil {
		z.ns, err = readNamespaces(fmt.Sprint(sb.Pid()))
	}
	if err == nil {
		z.hostNS, err = readNamespaces("self")
	}
	if err != nil {
		sb.Kill(StatusError)
		sb.Wait()
		<-ready
		return nil, fmt.Errorf("zygote: %w%s", err, out.tail())
	}
	go z.read()
	z.log.Info("zygote ready", "pid", sb.Pid(), "modules", strings.Join(cfg.Modules, ","), "skipped", strings.Join(z.skipped, ","))
	return z, nil
}

// ID is the zygote's sandbox id.
func (z *Zygote) ID() string { return z.cfg.ID }

// RootfsDir is the zygote's rootfs.
func (z *Zygote) RootfsDir() string { return z.cfg.RootfsDir }

// Pid is the zygote's host pid.
func (z *Zygote) Pid() int { return z.sb.Pid() }

// Skipped lists the modules that failed to import in the zygote.
func (z *Zygote) Skipped() []string { return slices.Clone(z.skipped) }

// Forks counts the children forked so far.
func (z *Zygote) Forks() uint64 { return z.forks.Load() }

// Done is closed when the zygote has died or been closed.
func (z *Zygote) Done() <-chan struct{} { return z.dead }

// Live counts the zygote's children alive now.
func (z *Zygote) Live() int {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.cfg.Children - len(z.free)
}

// Close ends the zygote. Its children die with it (they live in pid
// namespaces nested in its own); their sandboxes must still be waited for.
func (z *Zygote) Close() error {
	z.closing.Store(true)
	_ = unix.Shutdown(int(z.ctl.Fd()), unix.SHUT_WR) // EOF: the zygote returns
	select {
	case <-z.sb.Done():
	case <-time.After(time.Second):
		z.sb.Kill(StatusKilled)
	}
	_, err := z.sb.Wait()
	<-z.dead
	z.block.release()
	return err
}

// Kill kills the zygote at once; its children die with it.
func (z *Zygote) Kill() { z.sb.Kill(StatusKilled) }

// ErrZygoteUnsuitable reports a spec a zygote cannot run: another rootfs,
// or a command that is not `python3 [-I] -c CODE [ARGS...]`. Run it on the
// engine instead.
var ErrZygoteUnsuitable = errors.New("not a run for this zygote")

// ErrZygoteDead reports a zygote that has died or been closed.
var ErrZygoteDead = errors.New("the zygote is gone")

// Suitable reports whether spec can run on z (else Start fails with
// ErrZygoteUnsuitable).
func (z *Zygote) Suitable(spec *Spec) error {
	if spec.RootfsDir != z.cfg.RootfsDir {
		return fmt.Errorf("%w: rootfs %s, the zygote's is %s", ErrZygoteUnsuitable, spec.RootfsDir, z.cfg.RootfsDir)
	}
	a := spec.Argv
	if len(a) < 4 || (a[0] != "python3" && a[0] != "/usr/bin/python3") || a[1] != "-I" || a[2] != "-c" {
		return fmt.Errorf("%w: the command must be python3 -I -c CODE [ARGS...]", ErrZygoteUnsuitable)
	}
	return nil
}

// Start forks a child of the zygote for spec, sandboxes and verifies it,
// and returns once it runs spec's code. The Sandbox behaves as one from
// Engine.Start (Wait must be called).
func (z *Zygote) Start(ctx context.Context, spec Spec) (_ *Sandbox, err error) {
	if err := z.e.validate(&spec); err != nil {
		return nil, err
	}
	if err := z.Suitable(&spec); err != nil {
		return nil, err
	}
	s := &Sandbox{spec: spec, limits: spec.Limits.WithDefaults(), log: z.log.With("run", spec.ID)}
	defer func() {
		if err != nil {
			s.teardown()
		}
	}()
	env, err := buildEnv(spec.Env, s.limits.CPUs)
	if err != nil {
		return nil, err
	}
	c, err := z.newChild(spec.ID, cgroup.Limits{MemoryBytes: s.limits.MemoryBytes, Pids: s.limits.Pids, CPUs: s.limits.CPUs})
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", spec.ID, err)
	}
	s.cleanup = append(s.cleanup, func() {
		// Wait killed the cgroup already, unless we never got that far.
		s.killOnce.Do(func() { c.cg.Kill() })
		c.destroy()
	})
	s.zc, s.cg, s.done = c, c.cg, c.exited
	s.started = time.Now()

	ws, err := newWorkspace(s.limits.DiskBytes, c.hostID, c.hostID)
	if err != nil {
		return nil, err
	}
	s.ws = ws
	s.cleanup = append(s.cleanup, func() { ws.close() })
	for _, f := range spec.Files {
		if err := ws.WriteFile(f.Path, f.Data, f.Mode); err != nil {
			return nil, err
		}
	}
	prog := spec.Seccomp
	if prog == nil {
		prog = z.e.cfg.Seccomp
	}
	req := zygoteRequest{
		Slot: c.slot, Hostname: "sandbox",
		TmpBytes: s.limits.DiskBytes, NoFile: 1024, FSize: uint64(s.limits.DiskBytes),
		UID: SandboxUID, GID: SandboxGID, Masked: z.e.masked, ReadOnly: z.e.ro, Seccomp: prog,
		CgroupNS: true, Threads: max(1, int(math.Ceil(s.limits.CPUs))), Control: spec.Control,
		TestSkip: z.testSkip,
	}
	z.warmMigration()
	if err := z.fork(c, req, ws.mnt); err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", spec.ID, err)
	}
	if err := c.setUp(z, zygoteRun{Argv: spec.Argv, Env: env}); err != nil {
		return nil, fmt.Errorf("sandbox %s: zygote child: %w", spec.ID, err)
	}
	z.forks.Add(1)
	if spec.Control {
		s.control, c.run = c.run, nil
	}
	inW := c.inW
	c.inW = nil
	s.startIO(c.outR, c.errR, inW)
	s.arm(ctx)
	return s, nil
}

// Run is Start and Wait.
func (z *Zygote) Run(ctx context.Context, spec Spec) (*Result, error) {
	sb, err := z.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return sb.Wait()
}

// warmMigration starts, in the background, the RCU grace period that the
// child's move into its cgroup will need after an idle spell, by
// rewriting the zygote's own pid into its own cgroup: the wait then runs
// alongside the fork and the child's set-up instead of after them
// (measured: fork to running child after 300 ms idle, 20-22 -> 10-11 ms
// p50). Under load, migrations follow each other and need no warming.
func (z *Zygote) warmMigration() {
	now := time.Now().UnixNano()
	if last := z.lastWarm.Load(); now-last < int64(warmEvery) || !z.lastWarm.CompareAndSwap(last, now) {
		return
	}
	go func() {
		if err := z.sb.cg.Rewrite(z.sb.Pid()); err != nil {
			z.log.Debug("warm the cgroup migration", "err", err)
		}
	}()
}

// warmEvery spaces warmMigration's rewrites: a grace period started that
// recently still serves the next move.
const warmEvery = 5 * time.Millisecond

// fork sends one fork request and waits for the zygote's answer. The
// child's ends of its socket and pipes are closed here whatever happens.
func (z *Zygote) fork(c *zygoteChild, req zygoteRequest, workspace *os.File) error {
	defer c.closeTheirs()
	msg, err := frame.Append(nil, req)
	if err != nil {
		return err
	}
	rights := unix.UnixRights(int(c.theirs[0].Fd()), int(c.theirs[1].Fd()), int(c.theirs[2].Fd()), int(c.theirs[3].Fd()), int(workspace.Fd()))

	z.forkMu.Lock()
	defer z.forkMu.Unlock()
	z.mu.Lock()
	z.pending = c
	z.mu.Unlock()
	defer func() {
		z.mu.Lock()
		z.pending = nil
		z.mu.Unlock()
	}()
	select {
	case <-z.dead:
		return ErrZygoteDead
	default:
	}
	n, err := unix.SendmsgN(int(z.ctl.Fd()), msg, rights, nil, 0)
	for err == nil && n < len(msg) {
		var m int
		m, err = z.ctl.Write(msg[n:])
		n += m
	}
	if err != nil {
		return fmt.Errorf("fork request: %w", err)
	}
	select {
	case r := <-z.replies:
		if r.Error != "" {
			return fmt.Errorf("zygote: %s", r.Error)
		}
		if r.Forked == nil {
			return fmt.Errorf("zygote: unexpected reply %+v", r)
		}
		return nil
	case <-z.dead:
		return ErrZygoteDead
	}
}

// read dispatches the zygote's frames until it ends.
func (z *Zygote) read() {
	defer z.died()
	for {
		var r zygoteReply
		if err := readZygoteFrame(z.ctl, &r); err != nil {
			if !errors.Is(err, io.EOF) {
				z.log.Warn("zygote control socket", "err", err)
			}
			return
		}
		switch {
		case r.Exit != nil:
			z.mu.Lock()
			c := z.children[*r.Exit]
			delete(z.children, *r.Exit)
			z.mu.Unlock()
			if c != nil {
				c.exit(syscall.WaitStatus(r.Status))
			}
		case r.Forked != nil:
			z.mu.Lock()
			if c := z.pending; c != nil {
				c.zpid = *r.Forked
				z.children[c.zpid] = c
			}
			z.mu.Unlock()
			z.replies <- r
		default:
			z.replies <- r
		}
	}
}

// died marks the zygote gone: its children died with it.
func (z *Zygote) died() {
	z.deadOnce.Do(func() {
		close(z.dead)
		z.mu.Lock()
		children := z.children
		z.children = map[int]*zygoteChild{}
		z.mu.Unlock()
		for _, c := range children {
			c.exit(syscall.WaitStatus(unix.SIGKILL))
		}
		select {
		case <-z.sb.Done():
		default:
			if !z.closing.Load() {
				z.log.Warn("zygote control socket closed; killing the zygote")
			}
			z.sb.Kill(StatusError)
		}
	})
}

// zygoteChild is one child of a zygote, from slot to teardown.
type zygoteChild struct {
	z      *Zygote
	name   string
	slot   int
	hostID int
	live   *os.File
	cg     *cgroup.Cgroup
	zpid   int // pid in the zygote's namespace
	pid    int // host pid
	pidfd  int

	run    *os.File    // our end of the child's socket (fd 3 of its command)
	theirs [4]*os.File // run socket, stdin, stdout, stderr: the child's ends
	inW    *os.File
	outR   *os.File
	errR   *os.File
	buf    []byte // bytes read past the handshake's

	exitOnce    sync.Once
	exited      chan struct{}
	status      syscall.WaitStatus
	destroyOnce sync.Once
}

func (z *Zygote) newChild(name string, l cgroup.Limits) (_ *zygoteChild, err error) {
	c := &zygoteChild{z: z, name: name, slot: -1, pidfd: -1, exited: make(chan struct{})}
	defer func() {
		if err != nil {
			c.destroy()
		}
	}()
	z.mu.Lock()
	if len(z.free) > 0 {
		c.slot = z.free[len(z.free)-1]
		z.free = z.free[:len(z.free)-1]
	}
	z.mu.Unlock()
	if c.slot < 0 {
		return nil, fmt.Errorf("%w: the zygote has %d children alive, its most", ErrNoUIDs, z.cfg.Children)
	}
	c.hostID = z.block.childID(c.slot)
	if c.live, err = lockFile(livenessLock(name)); err != nil {
		return nil, fmt.Errorf("liveness lock: %w", err)
	}
	if c.cg, err = z.e.cgroups.Create(name, l); err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	// Our end is non-blocking (deadlines for the handshake); the child's
	// is a plain blocking socket.
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("run socket: %w", err)
	}
	c.run, c.theirs[0] = os.NewFile(uintptr(fds[0]), "run"), os.NewFile(uintptr(fds[1]), "run-child")
	if err := unix.SetNonblock(fds[1], false); err != nil {
		return nil, err
	}
	// The kernel attaches the sender's host pid to what the child writes.
	if err := unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		return nil, fmt.Errorf("run socket: %w", err)
	}
	if c.theirs[1], c.inW, err = os.Pipe(); err != nil {
		return nil, err
	}
	if c.outR, c.theirs[2], err = os.Pipe(); err != nil {
		return nil, err
	}
	if c.errR, c.theirs[3], err = os.Pipe(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *zygoteChild) closeTheirs() {
	for i, f := range c.theirs {
		if f != nil {
			f.Close()
			c.theirs[i] = nil
		}
	}
}

func (c *zygoteChild) exit(ws syscall.WaitStatus) {
	c.exitOnce.Do(func() {
		c.status = ws
		close(c.exited)
	})
}

// waitStatus is the child's wait status once exited is closed.
func (c *zygoteChild) waitStatus() syscall.WaitStatus { return c.status }

func (c *zygoteChild) signal(sig syscall.Signal) error {
	if c.pidfd < 0 {
		return unix.ESRCH
	}
	return unix.PidfdSendSignal(c.pidfd, sig, nil, 0)
}

// setUp is the engine's half of the child's set-up: learn its host pid,
// place it in its cgroup, verify what it made of itself, and say go with
// the run's command and environment.
func (c *zygoteChild) setUp(z *Zygote, run zygoteRun) error {
	if err := c.run.SetDeadline(time.Now().Add(zygoteSetupTimeout)); err != nil {
		return err
	}
	pid, err := c.hello()
	if err != nil {
		return err
	}
	// The pid is the kernel's; make sure it names our child, then hold it
	// by a pidfd so that a recycled pid can never be signalled.
	if c.pidfd, err = unix.PidfdOpen(pid, 0); err != nil {
		return fmt.Errorf("pidfd of %d: %w", pid, err)
	}
	c.pid = pid
	st, err := readStatus(pid)
	if err != nil {
		return err
	}
	if want := fmt.Sprintf("%d %d 1", pid, c.zpid); strings.Join(strings.Fields(st["NSpid"]), " ") != want {
		return fmt.Errorf("host pid %d is not the zygote's child %d: NSpid %q", pid, c.zpid, st["NSpid"])
	}
	if err := c.cg.Add(pid); err != nil {
		return err
	}
	if _, err := c.run.Write([]byte{'P'}); err != nil {
		return fmt.Errorf("placed: %w", err)
	}
	if err := c.expect('R'); err != nil {
		return err
	}
	if err := c.verify(z); err != nil {
		return fmt.Errorf("verification failed, the child never got its code: %w", err)
	}
	msg, err := frame.Append([]byte{'G'}, run)
	if err != nil {
		return err
	}
	if _, err := c.run.Write(msg); err != nil {
		return fmt.Errorf("go: %w", err)
	}
	return c.run.SetDeadline(time.Time{})
}

// hello reads the child's first byte and the host pid the kernel attached.
func (c *zygoteChild) hello() (int, error) {
	rc, err := c.run.SyscallConn()
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	var n, oobn int
	var rerr error
	if err := rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf, oob, 0)
		return rerr != unix.EAGAIN
	}); err != nil {
		return 0, fmt.Errorf("wait for the child: %w", err)
	}
	if rerr != nil {
		return 0, fmt.Errorf("wait for the child: %w", rerr)
	}
	c.buf = append(c.buf, buf[:n]...)
	if err := c.expect('H'); err != nil {
		return 0, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) == 0 {
		return 0, fmt.Errorf("the child's hello carried no credentials (%v)", err)
	}
	cred, err := unix.ParseUnixCredentials(&msgs[0])
	if err != nil {
		return 0, fmt.Errorf("the child's credentials: %w", err)
	}
	return int(cred.Pid), nil
}

// expect reads one byte and wants b; 'E' is followed by the child's own
// error message, up to EOF.
func (c *zygoteChild) expect(b byte) error {
	if len(c.buf) == 0 {
		var one [1]byte
		n, err := c.run.Read(one[:])
		if n == 0 {
			return fmt.Errorf("the child ended during its set-up (%v)%s", err, c.errTail())
		}
		c.buf = append(c.buf, one[0])
	}
	got := c.buf[0]
	c.buf = c.buf[1:]
	switch got {
	case b:
		return nil
	case 'E':
		rest, _ := io.ReadAll(io.LimitReader(c.run, 4096))
		return fmt.Errorf("%s", bytes.TrimSpace(append(c.buf, rest...)))
	}
	return fmt.Errorf("the child said %q, want %q", got, b)
}

// errTail is what a dead child left on its stderr, for error messages.
func (c *zygoteChild) errTail() string {
	_ = c.errR.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	b, _ := io.ReadAll(io.LimitReader(c.errR, 4096))
	_ = c.errR.SetReadDeadline(time.Time{})
	if len(b) == 0 {
		return ""
	}
	return "; stderr: " + string(bytes.TrimSpace(b))
}

// verify checks, from the host, what the child made of itself: its
// credentials, capabilities, no_new_privs, seccomp, id map, cgroup and
// that none of its namespaces is the zygote's or the engine's.
func (c *zygoteChild) verify(z *Zygote) error {
	st, err := readStatus(c.pid)
	if err != nil {
		return err
	}
	id := fmt.Sprint(c.hostID)
	ids := id + " " + id + " " + id + " " + id
	const none = "0000000000000000"
	for _, w := range [...][2]string{
		{"Uid", ids}, {"Gid", ids}, {"Groups", ""},
		{"CapInh", none}, {"CapPrm", none}, {"CapEff", none}, {"CapBnd", none}, {"CapAmb", none},
		{"Seccomp", "2"}, {"NoNewPrivs", "1"}, {"Threads", "1"},
	} {
		if got := strings.Join(strings.Fields(st[w[0]]), " "); got != w[1] {
			return fmt.Errorf("%s is %q, want %q", w[0], got, w[1])
		}
	}
	for _, f := range []string{"uid_map", "gid_map"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", c.pid, f))
		if err != nil {
			return err
		}
		if got, want := strings.Join(strings.Fields(string(b)), " "), fmt.Sprintf("%d %d 1", SandboxUID, c.hostID); got != want {
			return fmt.Errorf("%s is %q, want %q", f, got, want)
		}
	}
	ns, err := readNamespaces(fmt.Sprint(c.pid))
	if err != nil {
		return err
	}
	for _, k := range namespaceKinds {
		if ns[k] == z.ns[k] || ns[k] == z.hostNS[k] {
			return fmt.Errorf("the child shares its %s namespace (%s) with the zygote or the host", k, ns[k])
		}
	}
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", c.pid))
	if err != nil {
		return err
	}
	if !bytes.Contains(cg, []byte("/"+c.name+"\n")) {
		return fmt.Errorf("the child is not in its cgroup %s: %s", c.name, bytes.TrimSpace(cg))
	}
	return nil
}

// destroy kills the child (by pidfd, or through the zygote before it has
// one; the caller has killed its cgroup), waits for its exit, removes its
// cgroup and frees its slot. Safe on a half-built child and more than once.
func (c *zygoteChild) destroy() {
	c.destroyOnce.Do(func() {
		forked := c.zpid > 0
		switch {
		case c.pidfd >= 0:
			_ = unix.PidfdSendSignal(c.pidfd, unix.SIGKILL, nil, 0)
		case forked:
			c.z.kill(c.zpid)
		}
		exited := !forked
		if forked {
			select {
			case <-c.exited:
				exited = true
			case <-time.After(zygoteExitWait):
				c.z.log.Warn("zygote child did not exit; its slot stays taken", "run", c.name, "pid", c.pid)
			}
		}
		if c.cg != nil {
			if err := c.cg.Delete(); err != nil {
				c.z.log.Warn("remove zygote child cgroup", "run", c.name, "err", err)
			}
		}
		c.closeTheirs()
		for _, f := range []*os.File{c.run, c.inW, c.outR, c.errR} {
			if f != nil {
				f.Close()
			}
		}
		if c.pidfd >= 0 {
			unix.Close(c.pidfd)
		}
		if c.live != nil {
			os.Remove(c.live.Name())
			c.live.Close()
		}
		if c.slot >= 0 && exited {
			c.z.mu.Lock()
			c.z.free = append(c.z.free, c.slot)
			c.z.mu.Unlock()
		}
	})
}

// namespaceKinds are the namespaces every child must have of its own.
var namespaceKinds = [...]string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"}

// readNamespaces reads /proc/<pid>/ns/* links ("self" for this process).
func readNamespaces(pid string) (map[string]string, error) {
	ns := make(map[string]string, len(namespaceKinds))
	for _, k := range namespaceKinds {
		l, err := os.Readlink("/proc/" + pid + "/ns/" + k)
		if err != nil {
			return nil, err
		}
		ns[k] = l
	}
	return ns, nil
}

// readStatus parses /proc/<pid>/status into its fields.
func readStatus(pid int) (map[string]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	return parseStatus(b), nil
}

func parseStatus(b []byte) map[string]string {
	st := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok {
			st[k] = strings.TrimSpace(v)
		}
	}
	return st
}

// readZygoteFrame reads one frame of the zygote's into v.
func readZygoteFrame(r io.Reader, v any) error {
	b, err := frame.Read(r, maxZygoteFrame)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// logWriter logs a zygote's own output (it should have none: warnings of
// its imports at most), keeping the last of it for error messages.
type logWriter struct {
	log  *slog.Logger
	mu   sync.Mutex
	last []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = append(w.last, p...)
	if len(w.last) > 4096 {
		w.last = w.last[len(w.last)-4096:]
	}
	w.log.Warn("zygote output", "text", strings.TrimSpace(string(p)))
	return len(p), nil
}

func (w *logWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.last) == 0 {
		return ""
	}
	return "; output: " + string(bytes.TrimSpace(w.last))
}

// kill asks the zygote to SIGKILL a child of its own that never got far
// enough for the engine to hold it by pidfd or cgroup.
func (z *Zygote) kill(zpid int) {
	z.forkMu.Lock()
	defer z.forkMu.Unlock()
	_ = frame.Write(z.ctl, map[string]int{"kill": zpid})
}
