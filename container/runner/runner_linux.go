package runner

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container"
)

//go:embed runner.py
var runnerPy string

//go:embed charts.py
var chartsPy string

// runnerSource is runner.py with charts.py's source in its _CHART_SOURCE:
// one script, so that a zygote holds and a child takes one string.
var runnerSource = withCharts(runnerPy, chartsPy)

func withCharts(runner, charts string) string {
	const slot = "\n_CHART_SOURCE = ''\n"
	if !strings.Contains(runner, slot) {
		panic("runner.py has no _CHART_SOURCE slot")
	}
	return strings.Replace(runner, slot, "\n_CHART_SOURCE = "+strconv.Quote(charts)+"\n", 1)
}

//go:embed runner.js
var nodeRunnerSource string

// bootstrap runs the runner script, passed as argv[1], in a module of its
// own so that the user's __main__ namespace holds none of its names. In a
// zygote's child it takes the script compiled by ZygotePrelude when that
// is the same script (it saves ~2 ms per child).
const bootstrap = "import sys; p = sys.modules.get('_nsbox_prelude'); " +
	"c = p.RUNNER if getattr(p, 'RUNNER_SOURCE', None) == sys.argv[1] else compile(sys.argv[1], '<nsbox-runner>', 'exec'); " +
	"exec(c, {'__name__': '_nsbox_runner'})"

// ZygotePrelude is Python for container.ZygoteConfig.Prelude: it compiles
// the runner script once, in the zygote, for bootstrap to find.
func ZygotePrelude() string {
	return "RUNNER_SOURCE = " + strconv.Quote(runnerSource) + "\nRUNNER = compile(RUNNER_SOURCE, '<nsbox-runner>', 'exec')\n"
}

// ZygoteHeld is for container.ZygoteConfig.Held: the runner's source, an
// argument of every runner a zygote forks (Argv), goes to a child as the
// name of ZygotePrelude's RUNNER_SOURCE instead of 26 KB of JSON (~0.5 ms
// a run); bootstrap then compares the prelude's string with itself.
func ZygoteHeld() map[string]string { return map[string]string{runnerSource: "RUNNER_SOURCE"} }

// Argv is the command that starts the Python runner in a sandbox.
func Argv() []string { return []string{"python3", "-I", "-c", bootstrap, runnerSource} }

// nodeBootstrap runs the Node runner's source, passed as argv[1], as a
// function of require and import() under the filename nsbox-runner: the
// runner cuts frames of that name from the user's stack traces, and its
// names stay out of the cells' contexts.
const nodeBootstrap = "require('vm').runInThisContext(process.argv[1], {filename: 'nsbox-runner'})(require, (s) => import(s))"

// NodeArgv is the command that starts the Node.js runner in a sandbox.
// --experimental-vm-modules lets a cell's import() load a module (vm
// scripts have none without it); it prints no warning.
func NodeArgv() []string {
	return []string{"node", "--experimental-vm-modules", "-e", nodeBootstrap, nodeRunnerSource}
}

// argv is the command that starts lang's runner.
func (l Language) argv() []string {
	if l == JavaScript {
		return NodeArgv()
	}
	return Argv()
}

// nodeInterrupted is the name of the exception the Node runner reports for
// a cell that the host's SIGINT stopped (Python's KeyboardInterrupt).
const nodeInterrupted = "Interrupted"

// InterruptGrace is how long a cell has to stop after its timeout's
// KeyboardInterrupt before the whole sandbox is killed.
const InterruptGrace = 2 * time.Second

// OverflowGrace is how long a cell has to stop after the KeyboardInterrupt
// that its output passing the cap brought, before the whole sandbox is
// killed. It is shorter than InterruptGrace: what the cell writes from then
// on is thrown away, so a cell still writing gains nothing and holds a CPU.
const OverflowGrace = 500 * time.Millisecond

// markerWait bounds the wait for a cell's end markers on stdout and stderr
// after its reply came (the pipes may lag behind the control socket).
const markerWait = 2 * time.Second

// Starter spawns sandboxes; *container.Engine implements it.
type Starter interface {
	Start(ctx context.Context, spec container.Spec) (*container.Sandbox, error)
}

// ForkStarter is a Starter that may fork a sandbox from a zygote instead
// of spawning it (zygote.Set); StartForked says which it did, and Start
// records it for Runner.Forked.
type ForkStarter interface {
	Starter
	StartForked(ctx context.Context, spec container.Spec) (sb *container.Sandbox, forked bool, err error)
}

// Runner is a live interpreter (Python or Node.js) in a sandbox. Exec calls are
// serialised. Close ends it; it must always be called.
type Runner struct {
	sb      *container.Sandbox
	ctl     *os.File
	stdout  *sink
	stderr  *sink
	replies chan *reply
	readErr error // set before replies is closed

	sem    chan struct{} // one Exec at a time
	forked bool          // a zygote's child
	nspid  int           // the interpreter's pid in the sandbox (its ready frame's)
	lang   Language

	mu     sync.Mutex
	dead   Status // "" while alive, else why it died
	reason string
}

// Start starts the runner in a fresh sandbox made from spec: spec's Argv,
// Control, Stdout, Stderr and StreamOutput are set by Start.
// spec.Limits.Timeout is the sandbox's whole life; each Exec caps its own
// output (the engine keeps no copy of a runner's output). Start returns once the interpreter is ready.
//
// A zygote's child that dies before it is ready because its zygote died
// (killed or crashed under it) is started once more, cold or from the
// zygote that replaced it: no code has run in it yet.
func Start(ctx context.Context, eng Starter, spec container.Spec) (*Runner, error) {
	return StartLang(ctx, eng, spec, Python)
}

// StartLang is Start for a runner of lang. A JavaScript runner runs node
// on the rootfs (it needs node, and esbuild for TypeScript cells); it is
// always started cold: a zygote forks Python only (node cannot be forked
// safely), so a ForkStarter starts it as an Engine would.
func StartLang(ctx context.Context, eng Starter, spec container.Spec, lang Language) (*Runner, error) {
	r, err := start(ctx, eng, spec, lang)
	if errors.Is(err, errZygoteLost) && ctx.Err() == nil {
		r, err = start(ctx, eng, spec, lang)
	}
	return r, err
}

// zygoteNews is how long a zygote's child that died waits for the news
// that its zygote died too (Sandbox.ZygoteLost).
const zygoteNews = 100 * time.Millisecond

// errZygoteLost marks a start whose zygote's child died with its zygote.
var errZygoteLost = errors.New("its zygote died under it")

func start(ctx context.Context, eng Starter, spec container.Spec, lang Language) (*Runner, error) {
	r := &Runner{
		stdout:  &sink{},
		stderr:  &sink{},
		replies: make(chan *reply, 1),
		sem:     make(chan struct{}, 1),
		lang:    lang,
	}
	spec.Argv = lang.argv()
	spec.Control = true
	spec.Stdout, spec.Stderr = r.stdout, r.stderr
	// Every Exec caps its own output; the engine keeps no lifetime copy.
	spec.StreamOutput = true
	// ctx bounds the start only: the engine kills the sandbox when the
	// context it was started with ends.
	var sb *container.Sandbox
	var err error
	if fs, ok := eng.(ForkStarter); ok && lang.Forks() {
		sb, r.forked, err = fs.StartForked(context.WithoutCancel(ctx), spec)
	} else {
		sb, err = eng.Start(context.WithoutCancel(ctx), spec)
	}
	if err != nil {
		return nil, err
	}
	r.sb, r.ctl = sb, sb.Control()
	go r.read()

	select {
	case rep, ok := <-r.replies:
		if ok && rep.Ready {
			r.nspid = rep.Pid
			return r, nil
		}
		err = fmt.Errorf("%w: no ready frame (%v)", ErrProtocol, r.readErr)
	case <-sb.Done():
		err = errors.New("the interpreter exited before it was ready")
	case <-ctx.Done():
		err = ctx.Err()
	}
	lost := ctx.Err() == nil && sb.ZygoteLost(zygoteNews)
	sb.Kill(container.StatusError)
	res, _ := sb.Wait()
	name, needs := lang.kind().name, lang.kind().needs
	if lost {
		return nil, fmt.Errorf("start %s: %w (%v)", name, errZygoteLost, err)
	}
	if res != nil && len(res.Stderr) > 0 {
		err = fmt.Errorf("%w; stderr: %s", err, trim(res.Stderr, 2048))
	}
	return nil, fmt.Errorf("start %s: %w (does the rootfs have %s?)", name, err, needs)
}

func trim(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// read delivers the runner's frames until the socket ends.
func (r *Runner) read() {
	defer close(r.replies)
	for {
		rep, err := readReply(r.ctl)
		if err != nil {
			r.readErr = err
			return
		}
		r.replies <- rep
	}
}

// Sandbox is the runner's sandbox (for its workspace and stats).
func (r *Runner) Sandbox() *container.Sandbox { return r.sb }

// Language is the runner's interpreter.
func (r *Runner) Language() Language { return r.lang }

// Forked reports whether the runner's sandbox was forked from a zygote
// (its interpreter starts with the zygote's modules imported) rather than
// spawned cold.
func (r *Runner) Forked() bool { return r.forked }

// Dead reports why the runner ended ("" and "" while it lives).
func (r *Runner) Dead() (Status, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dead, r.reason
}

func (r *Runner) setDead(st Status, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dead == "" {
		r.dead, r.reason = st, reason
	}
}

// ExecRequest is one cell to run.
type ExecRequest struct {
	Code string
	// Timeout bounds the cell (0: none but the sandbox's own). Past it the
	// cell gets a KeyboardInterrupt, and InterruptGrace later the sandbox
	// is killed.
	Timeout time.Duration
	// OutputBytes caps the cell's output, per stream (0: 1 MiB): the
	// Result and the callbacks get that much, and a cell whose stdout or
	// stderr passes it is interrupted like a timeout (StatusOutputLimit),
	// and killed OverflowGrace later if it goes on.
	OutputBytes int64
	// KillOnOverflow kills the sandbox at once when the output passes
	// OutputBytes, instead of interrupting the cell: for a runner that
	// serves one run and is thrown away after.
	KillOnOverflow bool
	// KillOnTimeout kills the sandbox at once when the cell's Timeout
	// passes or ctx ends, instead of interrupting the cell (the Result has
	// no KeyboardInterrupt or Interrupted exception then): for a runner
	// that serves one run and is thrown away after. A Node runner then
	// runs the cell without breakOnSigint, whose watchdog thread (started
	// and joined around every cell) costs ~0.2 ms of an idle runner's
	// first cell.
	KillOnTimeout bool
	// OnStdout and OnStderr receive output as it is produced; they must
	// not keep the slice.
	OnStdout, OnStderr func([]byte)
	// AllowedImports, when not nil, lists the modules the cell's own code
	// may import (each allows its submodules); any other import it makes
	// raises ImportError. Modules import freely. Empty: no import at all.
	AllowedImports []string
	// Context names the namespace the cell runs in: "" is the default
	// (__main__); any other name gets a namespace of its own, made at its
	// first cell, with its own execution count. Names share the modules
	// imported, not the variables.
	Context string
	// Env holds environment variables set for this cell only (os.environ
	// and what the cell starts); the previous values come back after it.
	Env map[string]string
	// Transform is applied to the cell before it runs (StripTypes: a
	// TypeScript cell's types are stripped by esbuild in the sandbox,
	// which does not type-check); a runner that does not take it
	// refuses the cell (ErrUnsupported).
	Transform Transform
}

// Exec runs one cell and returns its result. The error is non-nil only
// when the cell could not be run at all (the runner is dead: ErrDead, or
// ctx ended while waiting for an earlier cell). A cell's own failures —
// exceptions, timeouts, an OOM or crash that ends the runner — are
// statuses in the Result. Cancelling ctx interrupts the cell like a timeout.
func (r *Runner) Exec(ctx context.Context, req ExecRequest) (*Result, error) {
	res, _, err := r.exec(ctx, req, false, nil)
	return res, err
}

// Preimport readies the interpreter for its first cell: it imports
// modules (may be none), so that the cell's own imports of them are
// instant, and runs the cell machinery once, so that the first cell is as
// fast as the next. It binds no name in the user's namespace and does not
// count as a cell. Modules that fail to import are returned in skipped,
// not as an error; the error is non-nil when the runner is dead or died
// importing (an OOM, a crash), or when the imports outlast timeout (0: no
// bound) or ctx.
func (r *Runner) Preimport(ctx context.Context, modules []string, timeout time.Duration) (skipped []string, err error) {
	res, skipped, err := r.exec(ctx, ExecRequest{Timeout: timeout}, true, modules)
	if err != nil {
		return nil, err
	}
	if res.Status != StatusOK {
		return nil, fmt.Errorf("preimport %v: %s %s", modules, res.Status, res.Error)
	}
	return skipped, nil
}

// exec runs one cell, or with setup a set-up step (Preimport).
func (r *Runner) exec(ctx context.Context, req ExecRequest, setup bool, preimport []string) (_ *Result, skipped []string, _ error) {
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	defer func() { <-r.sem }()
	res, skipped, err := r.cell(ctx, req, setup, preimport)
	if err == nil && res.Status == StatusOutputLimit && !res.Killed && !req.KillOnOverflow {
		r.cutWriters(res)
	}
	return res, skipped, err
}

// cell runs one cell while the caller holds r.sem.
func (r *Runner) cell(ctx context.Context, req ExecRequest, setup bool, preimport []string) (_ *Result, skipped []string, _ error) {
	if st, why := r.Dead(); st != "" {
		return nil, nil, fmt.Errorf("%w: %s", ErrDead, why)
	}
	if req.Transform != "" && !r.lang.Takes(req.Transform) {
		return nil, nil, fmt.Errorf("a cell with transform %q in a %s runner: %w", req.Transform, r.lang, ErrUnsupported)
	}
	if req.OutputBytes <= 0 {
		req.OutputBytes = 1 << 20
	}
	var m [16]byte
	_, _ = rand.Read(m[:])
	marker := "\x1b]nsbox-end-" + hex.EncodeToString(m[:]) + "\x07"
	start := time.Now()
	outSeen, outOver := r.stdout.begin([]byte(marker), req.OutputBytes, req.OnStdout)
	errSeen, errOver := r.stderr.begin([]byte(marker), req.OutputBytes, req.OnStderr)

	res := &Result{}
	code := req.Code
	if r.lang.Dedents() {
		code = Dedent(code)
	}
	frame := request{Code: code, Marker: marker, Setup: setup, Preimport: preimport,
		Stream: req.OnStdout != nil || req.OnStderr != nil, Context: req.Context, Env: req.Env, NoInterrupt: req.KillOnTimeout}
	frame.Lang = string(req.Transform)
	if req.AllowedImports != nil {
		frame.AllowedImports = &req.AllowedImports
	}
	if err := writeFrame(r.ctl, frame); err != nil {
		return r.gone(res, start), nil, nil
	}

	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var grace <-chan time.Time
	done := ctx.Done()
	interrupt := func(st Status, d time.Duration) {
		if req.KillOnTimeout {
			res.Status = st
			why := "the cell's time was up; the sandbox was killed"
			verdict := container.StatusTimeout
			if st == StatusCancelled {
				why, verdict = "the cell was cancelled; the sandbox was killed", container.StatusKilled
			}
			r.setDead(st, why)
			r.sb.Kill(verdict)
			timeout, done, outOver, errOver = nil, nil, nil, nil // the sandbox's end answers below
			return
		}
		res.Status = st
		_ = r.sb.Signal(syscall.SIGINT)
		grace = time.After(d)
		timeout, done, outOver, errOver = nil, nil, nil, nil
	}
	overflow := func() {
		if req.KillOnOverflow {
			res.Status = StatusOutputLimit
			r.setDead(StatusOutputLimit, "the cell's output passed its cap; the sandbox was killed")
			r.sb.Kill(container.StatusOutputLimit)
			timeout, done, outOver, errOver = nil, nil, nil, nil // the sandbox's end answers below
			return
		}
		interrupt(StatusOutputLimit, OverflowGrace)
	}
	for {
		select {
		case rep, ok := <-r.replies:
			if !ok {
				return r.gone(res, start), nil, nil
			}
			if !rep.Unmarked {
				r.waitMarkers(outSeen, errSeen)
			}
			r.finish(res, start)
			res.Count, res.Exception, res.Figures = rep.Count, rep.Exception, rep.Figures
			res.ValueData, res.ValueMime = rep.ValueData, rep.ValueMime
			skipped = rep.Skipped
			if rep.Value != nil {
				res.Value = *rep.Value
			}
			if res.Status == StatusTimeout && inTime(rep, req.Timeout) {
				// The deadline fired late (a stopped or starved host)
				// on a cell that had ended within it: its own verdict.
				res.Status = ""
			}
			switch {
			case res.Status != "": // timeout, cancelled or output_limit, interrupted in time
			case res.StdoutTruncated || res.StderrTruncated: // ended before its overflow was seen
				res.Status = StatusOutputLimit
			case rep.Exception != nil:
				res.Status = StatusException
			default:
				res.Status = StatusOK
			}
			return res, skipped, nil
		case <-r.sb.Done():
			return r.gone(res, start), nil, nil
		case <-timeout:
			interrupt(StatusTimeout, InterruptGrace)
		case <-done:
			interrupt(StatusCancelled, InterruptGrace)
		case <-outOver:
			overflow()
		case <-errOver:
			overflow()
		case <-grace:
			why := "the cell did not stop after its KeyboardInterrupt; the sandbox was killed"
			r.setDead(res.Status, why)
			verdict := container.StatusTimeout
			if res.Status == StatusOutputLimit {
				verdict = container.StatusOutputLimit
			}
			r.sb.Kill(verdict)
			<-r.sb.Done()
			r.finish(res, start)
			res.Killed = true
			res.Error = why
			return res, nil, nil
		}
	}
}

// inTime reports whether the runner's reply shows its cell ended within
// timeout by the sandbox's own clock, and not by the interrupt.
func inTime(rep *reply, timeout time.Duration) bool {
	interrupted := rep.Exception != nil && (rep.Exception.Name == "KeyboardInterrupt" || rep.Exception.Name == nodeInterrupted)
	return !interrupted && rep.ElapsedUs > 0 && time.Duration(rep.ElapsedUs)*time.Microsecond < timeout
}

func (r *Runner) waitMarkers(out, err <-chan struct{}) {
	t := time.NewTimer(markerWait)
	defer t.Stop()
	for _, ch := range []<-chan struct{}{out, err} {
		select {
		case <-ch:
		case <-t.C:
			return
		case <-r.sb.Done():
			return
		}
	}
}

// gone completes res for a cell whose interpreter is gone: the reason is
// the runner's (an OOM, a crash, an output cap that killed the sandbox).
func (r *Runner) gone(res *Result, start time.Time) *Result {
	r.died()
	r.finish(res, start)
	res.Status, res.Error = r.Dead()
	// An output cap or (KillOnTimeout) a timeout or cancel that killed it.
	res.Killed = res.Status == StatusOutputLimit || res.Status == StatusTimeout || res.Status == StatusCancelled
	return res
}

func (r *Runner) finish(res *Result, start time.Time) {
	res.Stdout, res.StdoutBytes, res.StdoutTruncated = r.stdout.end()
	res.Stderr, res.StderrBytes, res.StderrTruncated = r.stderr.end()
	res.Wall = time.Since(start)
}

// died records why the interpreter is gone: an OOM kill or a crash.
func (r *Runner) died() {
	st, err := r.sb.Stats()
	switch {
	case err == nil && st.OOMKills > 0:
		r.setDead(StatusOOM, "the sandbox ran out of memory (its memory limit); the interpreter was killed")
	default:
		r.setDead(StatusCrashed, "the interpreter exited or crashed")
	}
}

// LimitOutput caps the output of the runner's whole life from now on, per
// stream: what cells pass on (up to their caps) and everything written
// between cells (a background process's). Past n bytes the sandbox is
// killed (Dead says StatusOutputLimit); 0 removes the cap. The engine does
// not cap a runner's output: it streams it all here.
func (r *Runner) LimitOutput(n int64) {
	past := func() {
		r.setDead(StatusOutputLimit, fmt.Sprintf("the runner's output passed its lifetime cap of %d bytes per stream; the sandbox was killed", n))
		r.sb.Kill(container.StatusOutputLimit)
	}
	r.stdout.limitLife(n, past)
	r.stderr.limitLife(n, past)
}

// Close ends the interpreter (EOF on its control socket, then a kill if it
// does not exit within a second), tears the sandbox down and returns the
// sandbox's result. Later calls return the same.
func (r *Runner) Close() (*container.Result, error) {
	r.setDead(StatusClosed, "the runner was closed")
	_ = unix.Shutdown(int(r.ctl.Fd()), unix.SHUT_WR)
	select {
	case <-r.sb.Done():
	case <-time.After(time.Second):
		r.sb.Kill(container.StatusKilled)
	}
	return r.sb.Wait()
}

// Kill ends the sandbox at once with verdict v and tears it down.
func (r *Runner) Kill(v container.Status) (*container.Result, error) {
	r.setDead(StatusKilled, "the runner was killed")
	r.sb.Kill(v)
	return r.sb.Wait()
}

// ZygoteEnv is the environment a zygote that will fork runners must import
// its modules with: matplotlib then resolves its backend to the runner's
// own (which captures plt.show()) on first use in each child.
func ZygoteEnv() []string { return []string{"MPLBACKEND=module://nsbox_mpl_backend"} }
