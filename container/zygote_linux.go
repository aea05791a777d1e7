package container

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/agentapi/limits"
	"github.com/nsbox/nsbox/container/internal/cleanup"
	"github.com/nsbox/nsbox/container/internal/locks"
	"github.com/nsbox/nsbox/container/internal/output"
	"github.com/nsbox/nsbox/container/internal/verify"
	"github.com/nsbox/nsbox/container/internal/zyproto"
)

// Bounds on a zygote's exchanges with the engine.
const (
	// zygoteSetupTimeout bounds a child's way from fork to verified.
	zygoteSetupTimeout = 10 * time.Second
	// zygoteExitWait bounds the wait for a killed child's exit report.
	zygoteExitWait = 5 * time.Second
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
	// Held are string constants of Prelude, by value, to their names: an
	// argument of a child's command equal to one goes to it as the name,
	// and the child takes the prelude's copy (the runner's source,
	// runner.ZygoteHeld), not the bytes.
	Held map[string]string
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
	block   *locks.Block
	ctl     *os.File
	skipped []string
	loaded  map[string]bool   // top-level modules in the zygote's sys.modules
	stdlib  map[string]bool   // its sys.stdlib_module_names
	ns      map[string]string // the zygote's namespaces ("net:[4026…]")
	hostNS  map[string]string // the engine's own

	conn *zyproto.Conn

	mu   sync.Mutex
	free []int // free child slots

	forks    atomic.Uint64
	closing  atomic.Bool
	lastFork atomic.Int64  // unix nanoseconds of the last warmMigration
	active   chan struct{} // warmMigration kicks keepWarm

	// testSkip names a step children are told to skip (tests of the
	// verification only).
	testSkip string
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
	argv, stdin, err := zyproto.Command(zyproto.Config{
		Modules: cfg.Modules, Prelude: cfg.Prelude, HugePages: cfg.HugePages, Slots: cfg.Children, UserID: SandboxUID,
		Masked: e.masked, ReadOnly: e.ro, Seccomp: e.cfg.Seccomp,
	})
	if err != nil {
		return nil, err
	}
	z := &Zygote{
		e: e, cfg: cfg, log: e.log.With("zygote", cfg.ID), active: make(chan struct{}, 1),
	}
	for i := range cfg.Children {
		z.free = append(z.free, i)
	}
	if z.block, err = e.uids.AcquireBlock(); err != nil {
		return nil, err
	}
	cu := cleanup.Make(z.block.Release)
	defer cu.Clean()
	// The zygote's numeric libraries stay single-threaded, so that a raw
	// clone of it is safe; each child sets its own thread count.
	env := append(slices.Clone(cfg.Env), "OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1", "NUMEXPR_NUM_THREADS=1")
	out := output.NewLog(z.log, "zygote output")
	spec := Spec{
		ID:        cfg.ID,
		RootfsDir: cfg.RootfsDir,
		Argv:      argv,
		Stdin:     bytes.NewReader(stdin),
		Env:       env,
		Limits: Limits{
			Timeout:     math.MaxInt64,
			MemoryBytes: cfg.MemoryBytes,
			Pids:        int64(cfg.Children) + 16,
			CPUs:        float64(runtime.NumCPU()),
			DiskBytes:   minDisk(), // the zygote writes nothing
		},
		Control:      true,
		StreamOutput: true,
		Stdout:       out,
		Stderr:       out,
	}
	if err := e.validate(&spec); err != nil {
		return nil, fmt.Errorf("zygote: %w", err)
	}
	sb, err := e.start(context.WithoutCancel(ctx), spec, z.log, e.initProcesses(z.block))
	if err != nil {
		return nil, fmt.Errorf("zygote: %w", err)
	}
	cu.Add(func() {
		sb.Kill(StatusError)
		sb.Wait()
	})
	z.sb, z.ctl = sb, sb.Control()
	ready := make(chan error, 1)
	go func() {
		rep, err := zyproto.ReadReady(z.ctl)
		if rep != nil {
			z.skipped, z.loaded, z.stdlib = rep.Skipped, nameSet(rep.Loaded), nameSet(rep.Stdlib)
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
		z.ns, err = verify.Namespaces(strconv.Itoa(sb.Pid()))
	}
	if err == nil {
		z.hostNS, err = verify.Namespaces("self")
	}
	if err != nil {
		cu.Clean()
		<-ready
		return nil, fmt.Errorf("zygote: %w%s", err, out.Tail())
	}
	cu.Release()
	z.conn = zyproto.NewConn(z.ctl)
	go z.serve()
	go z.keepWarm()
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

// Has reports whether the top-level module is in the zygote's sys.modules:
// a child imports it without a search.
func (z *Zygote) Has(module string) bool { return z.loaded[module] }

// Stdlib reports whether the top-level module is in the zygote's
// interpreter's standard library.
func (z *Zygote) Stdlib(module string) bool { return z.stdlib[module] }

func nameSet(l []string) map[string]bool {
	m := make(map[string]bool, len(l))
	for _, s := range l {
		m[s] = true
	}
	return m
}

// Forks counts the children forked so far.
func (z *Zygote) Forks() uint64 { return z.forks.Load() }

// Done is closed when the zygote has died or been closed.
func (z *Zygote) Done() <-chan struct{} { return z.conn.Dead() }

// Children is the most children alive at once (ZygoteConfig.Children).
func (z *Zygote) Children() int { return z.cfg.Children }

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
	<-z.conn.Dead()
	z.block.Release()
	return err
}

// Kill kills the zygote at once; its children die with it.
func (z *Zygote) Kill() { z.sb.Kill(StatusKilled) }

// ErrZygoteUnsuitable reports a spec a zygote cannot run: another rootfs,
// or a command that is not `python3 [-I] -c CODE [ARGS...]`. Run it on the
// engine instead.
var ErrZygoteUnsuitable = errors.New("not a run for this zygote")

// ErrZygoteDead reports a zygote that has died or been closed.
var ErrZygoteDead = zyproto.ErrDead

// Suitable reports whether spec can run on z (else Start fails with
// ErrZygoteUnsuitable).
func (z *Zygote) Suitable(spec *Spec) error {
	if spec.RootfsDir != z.cfg.RootfsDir {
		return fmt.Errorf("%w: rootfs %s, the zygote's is %s", ErrZygoteUnsuitable, spec.RootfsDir, z.cfg.RootfsDir)
	}
	a := spec.Argv
	if spec.Init || len(a) < 4 || (a[0] != "python3" && a[0] != "/usr/bin/python3") || a[1] != "-I" || a[2] != "-c" {
		return fmt.Errorf("%w: the command must be python3 -I -c CODE [ARGS...], with no init", ErrZygoteUnsuitable)
	}
	return nil
}

// Start forks a child of the zygote for spec, sandboxes and verifies it,
// and returns once it runs spec's code. The Sandbox behaves as one from
// Engine.Start (Wait must be called).
func (z *Zygote) Start(ctx context.Context, spec Spec) (*Sandbox, error) {
	if err := z.e.validate(&spec); err != nil {
		return nil, err
	}
	if err := z.Suitable(&spec); err != nil {
		return nil, err
	}
	return z.e.start(ctx, spec, z.log, z.newChild)
}

// Run is Start and Wait.
func (z *Zygote) Run(ctx context.Context, spec Spec) (*Result, error) {
	sb, err := z.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return sb.Wait()
}

// warmMigration keeps the cgroup migration warm from now until warmFor
// after the last fork (keepWarm): a child's move into its cgroup on v1
// waits an RCU grace period (9-12 ms here) unless a migration on the host
// started one shortly before.
func (z *Zygote) warmMigration() {
	z.lastFork.Store(time.Now().UnixNano())
	select {
	case z.active <- struct{}{}:
	default:
	}
}

// keepWarm rewrites the zygote's own pid into its own cgroup (a migration
// that moves nothing) at once when forks resume, then every warmEvery
// until warmFor has passed without a fork, so that a child's move finds
// the grace period already passed. Starting one only at the fork (as
// before) hid it behind the fork's clone; a spare child (zygote.py) took
// the clone off the request's path and left the move waiting ~4 ms of it.
// It costs one write to cgroup.procs every warmEvery while runs come.
func (z *Zygote) keepWarm() {
	for {
		select {
		case <-z.active:
		case <-z.conn.Dead():
			return
		}
		for time.Since(time.Unix(0, z.lastFork.Load())) < warmFor {
			if err := z.sb.cg.Rewrite(z.sb.Pid()); err != nil {
				z.log.Debug("warm the cgroup migration", "err", err)
			}
			select {
			case <-time.After(warmEvery):
			case <-z.conn.Dead():
				return
			}
		}
	}
}

// warmEvery spaces keepWarm's rewrites: well within a grace period, after
// which the kernel's migration lock goes back to its slow state.
const warmEvery = 5 * time.Millisecond

// warmFor is how long keepWarm goes on after the last fork.
const warmFor = time.Second

// serve dispatches the zygote's frames until it ends, then kills it
// unless it is ending already.
func (z *Zygote) serve() {
	if err := z.conn.Serve(); err != nil {
		z.log.Warn("zygote control socket", "err", err)
	}
	select {
	case <-z.sb.Done():
	default:
		if !z.closing.Load() {
			z.log.Warn("zygote control socket closed; killing the zygote")
		}
		z.sb.Kill(StatusError)
	}
}

// minDisk is the least /workspace the limits table allows.
func minDisk() int64 {
	r, _ := limits.Lookup("disk")
	return int64(r.Min)
}
