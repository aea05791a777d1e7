package container

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/agentapi/limits"
	"github.com/nsbox/nsbox/cgroup"
	"github.com/nsbox/nsbox/container/internal/cleanup"
	"github.com/nsbox/nsbox/container/internal/initproc"
	"github.com/nsbox/nsbox/container/internal/leftovers"
	"github.com/nsbox/nsbox/container/internal/locks"
	"github.com/nsbox/nsbox/container/internal/mnt"
	"github.com/nsbox/nsbox/container/internal/reaper"
	"github.com/nsbox/nsbox/container/sandboxinit"
	"github.com/nsbox/nsbox/seccomp"
)

// Config configures an Engine. The zero value is usable.
type Config struct {
	// RunDir holds the engine's runtime state. Default /run/nsbox.
	RunDir string
	// CgroupName is the cgroup under this process's own cgroup that holds
	// every sandbox cgroup. Default "nsbox".
	CgroupName string
	// Seccomp is the default program for runs; nil compiles seccomp.Default().
	Seccomp seccomp.Program
	// Logger receives the engine's structured logs; nil discards them.
	Logger *slog.Logger
	// InitBinary is the sandbox init to exec: a build of cmd/nsbox-init,
	// small enough to start in about a millisecond. Empty: "nsbox-init" next
	// to this executable when there is one, else this executable itself
	// (whose main must call MaybeInit first).
	InitBinary string
	// Spares is how many sandbox inits the engine keeps cloned and placed
	// in their cgroups ahead of time (each still gets a fresh set of
	// namespaces and serves one run). 0 spawns every run on demand.
	Spares int
	// Landlock is sandboxinit.LandlockAuto (""), LandlockRequired or
	// LandlockOff: the second layer under the namespaces (docs/SECURITY.md).
	Landlock string
}

// LockDir holds the uid-slot and zygote-block locks of every engine on the
// host, whatever its RunDir, so that engines never hand out the same host
// uid. An engine's liveness locks are in its own <RunDir>/locks.
const LockDir = locks.Dir

// Engine spawns sandboxes. It is safe for concurrent use.
type Engine struct {
	cfg     Config
	log     *slog.Logger
	cgroups *cgroup.Manager
	uids    *locks.Allocator
	liveDir string   // <RunDir>/locks: the liveness locks of this engine's sandboxes
	self    *os.File // sealed copy of the init binary, exec'd as init
	masked  []string
	ro      []string
	spares  *initproc.Spares
	spawner *initproc.Spawner // v1: clones inits in their cgroups
	idmaps  mnt.Cache         // user namespaces of idmapped mounts (container/internal/mnt)
	reaper  reaper.Seal       // pid 1 of the runs with Spec.Init
}

// New prepares an engine: it checks it runs as root, compiles the default
// seccomp program, seals a copy of its own binary for init, and prepares the
// cgroup parent and lock directory.
func New(cfg Config) (_ *Engine, err error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if cfg.RunDir == "" {
		cfg.RunDir = "/run/nsbox"
	}
	if cfg.CgroupName == "" {
		cfg.CgroupName = "nsbox"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Seccomp == nil {
		p, err := seccomp.Default()
		if err != nil {
			return nil, fmt.Errorf("default seccomp profile: %w", err)
		}
		if cfg.Seccomp, err = p.Compile(); err != nil {
			return nil, fmt.Errorf("compile default seccomp profile: %w", err)
		}
	}
	var noLandlock bool
	if cfg.Landlock, noLandlock, err = sandboxinit.CheckLandlock(cfg.Landlock); err != nil {
		return nil, err
	}
	if noLandlock {
		log.Warn("this kernel has no Landlock: sandboxes run without the second layer under their namespaces (nsbox doctor)")
	}
	liveDir := filepath.Join(cfg.RunDir, "locks")
	for _, d := range []string{cfg.RunDir, LockDir, liveDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	cg, err := cgroup.NewManager(cfg.CgroupName)
	if err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	cu := cleanup.Make(func() { closeCgroups(cg, log) })
	defer cu.Clean()
	self, initPath, err := initproc.Seal(cfg.InitBinary, cfg.RunDir)
	if err != nil {
		return nil, err
	}
	log.Debug("sandbox init", "binary", initPath)
	var spawner *initproc.Spawner
	if cg.Mode() != cgroup.ModeV2 {
		spawner = initproc.NewSpawner(cg, log)
	}
	e := &Engine{
		cfg:     cfg,
		log:     log,
		cgroups: cg,
		uids:    &locks.Allocator{Dir: LockDir},
		liveDir: liveDir,
		self:    self,
		spawner: spawner,
		masked:  maskedPaths(),
		ro:      readOnlyPaths(),
	}
	if cfg.Spares > 0 {
		def := DefaultLimits()
		lim := cgroup.Limits{MemoryBytes: def.MemoryBytes, Pids: def.Pids, CPUs: def.CPUs}
		e.spares = initproc.NewSpares(cfg.Spares, func() (*initproc.Proc, error) { return e.newInit("sp-"+NewID(), lim, nil) }, log)
	}
	cu.Release()
	return e, nil
}

// closeCgroups removes the cgroup parent unless another engine with the
// same CgroupName still has sandboxes in it.
func closeCgroups(cg *cgroup.Manager, log *slog.Logger) {
	if err := cg.Close(); err != nil && !errors.Is(err, unix.EBUSY) {
		log.Debug("remove cgroup parent", "err", err)
	}
}

// CgroupMode reports the cgroup layout the engine enforces limits with.
func (e *Engine) CgroupMode() cgroup.Mode { return e.cgroups.Mode() }

// Close releases the engine's resources and removes its cgroup parent when
// no sandbox cgroup is left in it (another engine with the same CgroupName
// may still be using it; then it stays). Call it after the last Run.
func (e *Engine) Close() error {
	if e.spares != nil {
		e.spares.Close()
	}
	if e.spawner != nil {
		e.spawner.Close()
	}
	closeCgroups(e.cgroups, e.log)
	e.idmaps.Close()
	e.reaper.Close()
	return e.self.Close()
}

// Recover removes whatever sandboxes of a dead predecessor (with the same
// CgroupName) left behind, and reports how many it removed. A sandbox
// whose liveness lock is held outside it belongs to a live engine and is
// left alone; one with no lock in this RunDir is removed only when empty
// and untouched for a minute (container/internal/leftovers).
func (e *Engine) Recover() (int, error) {
	return leftovers.Sweep(e.cgroups, e.liveDir, LockDir, e.log)
}

func validID(id string) error {
	if id == "" || len(id) > 64 {
		return fmt.Errorf("%w: id must be 1-64 characters", ErrInvalidSpec)
	}
	for _, c := range id {
		if !(c == '-' || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
			return fmt.Errorf("%w: id %q: only letters, digits, - and _", ErrInvalidSpec, id)
		}
	}
	return nil
}

func (e *Engine) validate(spec *Spec) error {
	if spec.ID == "" {
		spec.ID = NewID()
	}
	if err := validID(spec.ID); err != nil {
		return err
	}
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return fmt.Errorf("%w: argv is empty", ErrInvalidSpec)
	}
	for _, a := range spec.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("%w: argv contains a NUL byte", ErrInvalidSpec)
		}
	}
	if spec.RootfsDir == "" {
		return fmt.Errorf("%w: no rootfs", ErrInvalidSpec)
	}
	if st, err := os.Stat(filepath.Join(spec.RootfsDir, "workspace")); err != nil || !st.IsDir() {
		return fmt.Errorf("%w: rootfs %s is not an nsbox rootfs (no /workspace directory)", ErrInvalidSpec, spec.RootfsDir)
	}
	if key, err := limits.CheckSet(spec.Limits); err != nil {
		return fmt.Errorf("%w: %s limit: %v", ErrInvalidSpec, key, err)
	}
	seen := map[string]bool{}
	for _, f := range spec.Files {
		if err := ValidPath(f.Path); err != nil {
			return fmt.Errorf("%w: file: %v", ErrInvalidSpec, err)
		}
		if seen[f.Path] {
			return fmt.Errorf("%w: file %s given twice", ErrInvalidSpec, f.Path)
		}
		seen[f.Path] = true
	}
	if err := validMounts(spec.Mounts); err != nil {
		return err
	}
	for _, p := range spec.ReturnFiles {
		if _, err := filepathMatchCheck(p); err != nil {
			return fmt.Errorf("%w: return_files pattern %q: %v", ErrInvalidSpec, p, err)
		}
	}
	return nil
}

func filepathMatchCheck(p string) (bool, error) { return filepath.Match(p, "") }
