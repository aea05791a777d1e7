package container

import (
	"context"
	"log/slog"

	"github.com/nsbox/nsbox/seccomp"
)

// Config configures an Engine. The zero value is usable.
type Config struct {
	// RunDir holds per-sandbox state (workspaces, locks). Default /run/nsbox.
	RunDir string
	// CgroupName is the cgroup under this process's own cgroup that holds
	// every sandbox cgroup. Default "nsbox".
	CgroupName string
	// Seccomp is the default program for runs; nil compiles seccomp.Default().
	Seccomp seccomp.Program
	// Logger receives the engine's structured logs; nil discards them.
	Logger *slog.Logger
}

// Engine spawns sandboxes. It is safe for concurrent use.
type Engine struct {
	cfg Config
}

// New prepares an engine: it checks it runs as root, compiles the default
// seccomp program and prepares the cgroup parent and run directory.
func New(cfg Config) (*Engine, error) {
	return &Engine{cfg: cfg}, nil
}

// Run executes spec in a fresh sandbox and returns its result once every
// process, mount, cgroup and directory of the run is gone. The error is
// non-nil (and the result nil) when the spec is invalid (ErrInvalidSpec) or
// the sandbox could not be set up; the run's own failures are verdicts in the
// Result. Cancelling ctx kills the sandbox (status "killed").
func (e *Engine) Run(ctx context.Context, spec Spec) (*Result, error) {
	panic("not built yet")
}

// Recover removes whatever sandboxes of a dead predecessor left behind
// (cgroups, mounts, workspaces) and reports how many it removed.
func (e *Engine) Recover() (int, error) { return 0, nil }

// Close releases the engine's resources. Runs in flight are not affected.
func (e *Engine) Close() error { return nil }
