package container

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/opencontainers/runc/libcontainer/exeseal"
	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/cgroup"
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
}

// LockDir holds the uid-slot and liveness locks of every engine on the host,
// whatever its RunDir, so that engines never hand out the same host uid.
const LockDir = "/run/nsbox/locks"

// Engine spawns sandboxes. It is safe for concurrent use.
type Engine struct {
	cfg     Config
	log     *slog.Logger
	cgroups *cgroup.Manager
	uids    *uidAllocator
	self    *os.File // sealed copy of this binary, re-executed as init
	masked  []string
	ro      []string
}

// New prepares an engine: it checks it runs as root, compiles the default
// seccomp program, seals a copy of its own binary for init, and prepares the
// cgroup parent and lock directory.
func New(cfg Config) (*Engine, error) {
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
	for _, d := range []string{cfg.RunDir, LockDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	cg, err := cgroup.NewManager(cfg.CgroupName)
	if err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	// CVE-2019-5736: the sandbox must never be able to reach (and rewrite)
	// the binary that runs as init; exec a sealed copy instead.
	self, err := exeseal.CloneSelfExe(cfg.RunDir)
	if err != nil {
		return nil, fmt.Errorf("seal a copy of the nsbox binary: %w", err)
	}
	return &Engine{
		cfg:     cfg,
		log:     log,
		cgroups: cg,
		uids:    &uidAllocator{dir: LockDir},
		self:    self,
		masked:  maskedPaths(),
		ro:      readOnlyPaths(),
	}, nil
}

// CgroupMode reports the cgroup layout the engine enforces limits with.
func (e *Engine) CgroupMode() cgroup.Mode { return e.cgroups.Mode() }

// Close releases the engine's resources and removes its cgroup parent when
// no sandbox cgroup is left in it (another engine with the same CgroupName
// may still be using it; then it stays). Call it after the last Run.
func (e *Engine) Close() error {
	if err := e.cgroups.Close(); err != nil && !errors.Is(err, unix.EBUSY) {
		e.log.Debug("remove cgroup parent", "err", err)
	}
	return e.self.Close()
}

// Recover removes whatever sandboxes of a dead predecessor (with the same
// CgroupName) left behind, and reports how many it removed. A sandbox whose
// liveness lock is still held belongs to a live engine and is left alone.
func (e *Engine) Recover() (int, error) {
	ids, err := e.cgroups.Leftovers()
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, id := range ids {
		lock, err := lockFile(livenessLock(id))
		if errors.Is(err, unix.EWOULDBLOCK) {
			continue // alive, owned by another engine
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := e.cgroups.Remove(id); err != nil {
			errs = append(errs, fmt.Errorf("sandbox %s: %w", id, err))
		} else {
			n++
			e.log.Info("removed leftover sandbox", "id", id)
		}
		os.Remove(lock.Name())
		lock.Close()
	}
	return n, errors.Join(errs...)
}

func livenessLock(id string) string { return filepath.Join(LockDir, "sandbox-"+id+".lock") }

// NewID returns a fresh run id.
func NewID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
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
	l := spec.Limits
	switch {
	case l.Timeout < 0, l.MemoryBytes < 0, l.Pids < 0, l.CPUs < 0, l.DiskBytes < 0, l.OutputBytes < 0:
		return fmt.Errorf("%w: limits must not be negative", ErrInvalidSpec)
	case l.MemoryBytes != 0 && l.MemoryBytes < 8<<20:
		return fmt.Errorf("%w: memory limit %d is below 8 MiB", ErrInvalidSpec, l.MemoryBytes)
	case l.Pids != 0 && l.Pids < 2:
		return fmt.Errorf("%w: pids limit must be at least 2", ErrInvalidSpec)
	case l.CPUs != 0 && l.CPUs < 0.01:
		return fmt.Errorf("%w: cpus must be at least 0.01", ErrInvalidSpec)
	case l.DiskBytes != 0 && l.DiskBytes < 1<<20:
		return fmt.Errorf("%w: disk limit is below 1 MiB", ErrInvalidSpec)
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
	for _, p := range spec.ReturnFiles {
		if _, err := filepathMatchCheck(p); err != nil {
			return fmt.Errorf("%w: return_files pattern %q: %v", ErrInvalidSpec, p, err)
		}
	}
	return nil
}

func filepathMatchCheck(p string) (bool, error) { return filepath.Match(p, "") }

// run is the state of one sandbox while it lives.
type run struct {
	spec    Spec
	limits  Limits
	log     *slog.Logger
	slot    *uidSlot
	live    *os.File
	ws      *workspace
	cg      *cgroup.Cgroup
	cleanup []func()

	mu       sync.Mutex
	verdict  Status // timeout, output_limit or killed when the engine ended it
	killOnce sync.Once
}

// kill ends the whole sandbox with a verdict; the first verdict wins.
func (r *run) kill(v Status) {
	r.mu.Lock()
	if r.verdict == "" {
		r.verdict = v
	}
	r.mu.Unlock()
	r.killOnce.Do(func() {
		if err := r.cg.Kill(); err != nil {
			r.log.Warn("kill sandbox", "err", err)
		}
	})
}

func (r *run) teardown() {
	for i := len(r.cleanup) - 1; i >= 0; i-- {
		r.cleanup[i]()
	}
	r.cleanup = nil
}

// Run executes spec in a fresh sandbox and returns its result once every
// process, cgroup and workspace of the run is gone. The error is non-nil
// (and the result nil) when the spec is invalid (ErrInvalidSpec) or the
// sandbox could not be set up; the run's own failures are verdicts in the
// Result. Cancelling ctx kills the sandbox (status "killed").
func (e *Engine) Run(ctx context.Context, spec Spec) (*Result, error) {
	if err := e.validate(&spec); err != nil {
		return nil, err
	}
	r := &run{spec: spec, limits: spec.Limits.WithDefaults(), log: e.log.With("run", spec.ID)}
	defer r.teardown()
	env, err := buildEnv(spec.Env, r.limits.CPUs)
	if err != nil {
		return nil, err
	}
	if err := e.prepare(r); err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", spec.ID, err)
	}
	return e.execute(ctx, r, env)
}

// prepare takes a uid slot and the liveness lock, creates the cgroup and
// the workspace with the input files. Every step registers its undo.
func (e *Engine) prepare(r *run) error {
	slot, err := e.uids.acquire()
	if err != nil {
		return err
	}
	r.slot = slot
	r.cleanup = append(r.cleanup, slot.release)

	live, err := lockFile(livenessLock(r.spec.ID))
	if err != nil {
		return fmt.Errorf("liveness lock: %w", err)
	}
	r.cleanup = append(r.cleanup, func() { os.Remove(live.Name()); live.Close() })

	cg, err := e.cgroups.Create(r.spec.ID, cgroup.Limits{
		MemoryBytes: r.limits.MemoryBytes,
		Pids:        r.limits.Pids,
		CPUs:        r.limits.CPUs,
	})
	if err != nil {
		return fmt.Errorf("create cgroup: %w", err)
	}
	r.cg = cg
	r.cleanup = append(r.cleanup, func() {
		if err := cg.Kill(); err != nil {
			r.log.Warn("kill cgroup", "err", err)
		}
		if err := cg.Delete(); err != nil {
			r.log.Warn("delete cgroup", "err", err)
		}
	})

	ws, err := newWorkspace(r.limits.DiskBytes, slot.userID(), slot.userID())
	if err != nil {
		return err
	}
	r.ws = ws
	r.cleanup = append(r.cleanup, func() { ws.close() })
	for _, f := range r.spec.Files {
		if err := ws.writeFile(f.Path, f.Data, f.Mode); err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) initConfig(r *run, env []string) initConfig {
	prog := r.spec.Seccomp
	if prog == nil {
		prog = e.cfg.Seccomp
	}
	return initConfig{
		Rootfs:     r.spec.RootfsDir,
		Argv:       r.spec.Argv,
		Env:        env,
		Hostname:   "sandbox",
		TmpBytes:   r.limits.DiskBytes,
		NoFile:     1024,
		FSizeBytes: uint64(r.limits.DiskBytes),
		UID:        SandboxUID,
		GID:        SandboxGID,
		Masked:     e.masked,
		ReadOnly:   e.ro,
		Seccomp:    prog,
		CgroupNS:   r.cg.CloneFD() < 0,
	}
}

func (e *Engine) execute(ctx context.Context, r *run, env []string) (*Result, error) {
	spec := &r.spec
	var pipes []*os.File
	closeAll := func() {
		for _, f := range pipes {
			f.Close()
		}
		pipes = nil
	}
	defer closeAll()
	newPipe := func() (*os.File, *os.File, error) {
		rd, wr, err := os.Pipe()
		if err == nil {
			pipes = append(pipes, rd, wr)
		}
		return rd, wr, err
	}
	cfgR, cfgW, err := newPipe()
	if err != nil {
		return nil, err
	}
	syncR, syncW, err := newPipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := newPipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := newPipe()
	if err != nil {
		return nil, err
	}
	errOutR, errOutW, err := newPipe()
	if err != nil {
		return nil, err
	}
	inR, inW, err := newPipe()
	if err != nil {
		return nil, err
	}

	cmd := &exec.Cmd{
		Path:       fmt.Sprintf("/proc/self/fd/%d", e.self.Fd()),
		Args:       []string{initArg0},
		Env:        []string{initEnv},
		Stdin:      inR,
		Stdout:     outW,
		Stderr:     errOutW,
		ExtraFiles: []*os.File{cfgR, syncR, errW, os.NewFile(uintptr(r.ws.fd), "workspace")},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
				syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
			UidMappings: []syscall.SysProcIDMap{
				{ContainerID: 0, HostID: r.slot.rootID(), Size: 1},
				{ContainerID: SandboxUID, HostID: r.slot.userID(), Size: 1},
			},
			GidMappings: []syscall.SysProcIDMap{
				{ContainerID: 0, HostID: r.slot.rootID(), Size: 1},
				{ContainerID: SandboxGID, HostID: r.slot.userID(), Size: 1},
			},
			GidMappingsEnableSetgroups: true,
			Credential:                 &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}},
			Setsid:                     true,
			Pdeathsig:                  syscall.SIGKILL,
		},
	}
	if fd := r.cg.CloneFD(); fd >= 0 {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWCGROUP
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = fd
	}

	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("spawn sandbox init: %w", err)
	}
	// The child holds its ends now.
	for _, f := range []*os.File{cfgR, syncR, errW, inR, outW, errOutW} {
		f.Close()
	}
	r.cleanup = append(r.cleanup, func() {
		// The cgroup kill in teardown ends every process; reap init if
		// the run ended before Wait did.
		if cmd.ProcessState == nil {
			r.cg.Kill()
			cmd.Wait()
		}
	})

	// Init builds its mounts while we place it in its cgroup.
	cfg := e.initConfig(r, env)
	cfgErr := json.NewEncoder(cfgW).Encode(&cfg)
	cfgW.Close()
	if cfgErr != nil {
		return nil, fmt.Errorf("send init config: %w", cfgErr)
	}
	if r.cg.CloneFD() < 0 {
		if err := r.cg.Add(cmd.Process.Pid); err != nil {
			return nil, fmt.Errorf("place sandbox in its cgroup: %w", err)
		}
	}
	if _, err := syncW.Write([]byte{1}); err != nil {
		// init died before it could wait: its error says why.
		msg, _ := io.ReadAll(errR)
		return nil, fmt.Errorf("sandbox init: %s", bytes.TrimSpace(msg))
	}
	syncW.Close()

	stdout := &capture{limit: r.limits.OutputBytes, live: spec.Stdout, onOverflow: func() { r.kill(StatusOutputLimit) }}
	stderr := &capture{limit: r.limits.OutputBytes, live: spec.Stderr, onOverflow: func() { r.kill(StatusOutputLimit) }}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); io.Copy(stdout, outR) }()
	go func() { defer readers.Done(); io.Copy(stderr, errOutR) }()
	go feedStdin(inW, spec.Stdin)

	// EOF on the error pipe without a message means the exec happened.
	initMsg, _ := io.ReadAll(errR)

	timer := time.AfterFunc(r.limits.Timeout, func() { r.kill(StatusTimeout) })
	defer timer.Stop()
	stopCtx := context.AfterFunc(ctx, func() { r.kill(StatusKilled) })
	defer stopCtx()

	waitErr := cmd.Wait()
	wall := time.Since(start)
	timer.Stop()
	// The main process is gone; nothing else of the run may outlive it.
	r.kill("")
	readers.Wait()

	res := &Result{ID: spec.ID, WallTime: wall}
	res.Stdout, res.StdoutBytes, res.StdoutTruncated = stdout.result()
	res.Stderr, res.StderrBytes, res.StderrTruncated = stderr.result()
	st, statErr := r.cg.Stats()
	if statErr != nil {
		r.log.Warn("cgroup stats", "err", statErr)
	}
	res.CPUTime = st.CPUUsage
	res.MemoryPeakBytes = st.MemoryPeakBytes

	if len(initMsg) > 0 {
		msg := string(bytes.TrimSpace(initMsg))
		if strings.Contains(msg, "command not found") {
			res.Status, res.ExitCode = StatusExitNonzero, 127
			res.Stderr = append(res.Stderr, []byte("nsbox: "+msg+"\n")...)
			return res, nil
		}
		return nil, fmt.Errorf("sandbox init: %s", msg)
	}

	r.mu.Lock()
	verdict := r.verdict
	r.mu.Unlock()
	res.ExitCode, res.Signal = exitStatus(cmd.ProcessState, waitErr)
	switch {
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
	if verdict == StatusTimeout && st.OOMKills > 0 {
		res.Status = StatusOOM
	}

	inputs := make(map[string]string, len(spec.Files))
	for _, f := range spec.Files {
		sum := sha256.Sum256(f.Data)
		inputs[f.Path] = hex.EncodeToString(sum[:])
	}
	files, err := r.ws.collect(inputs, spec.ReturnFiles)
	if err != nil {
		r.log.Warn("list workspace files", "err", err)
	}
	res.Files = files
	r.log.Debug("run finished", "status", res.Status, "exit", res.ExitCode, "wall", wall)
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

func exitStatus(ps *os.ProcessState, waitErr error) (code int, signal string) {
	if ps == nil {
		return -1, ""
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok {
		return ps.ExitCode(), ""
	}
	if ws.Signaled() {
		return 128 + int(ws.Signal()), unix.SignalName(ws.Signal())
	}
	return ws.ExitStatus(), ""
}
