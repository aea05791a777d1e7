package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/daemon/admission"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/wire"
	"github.com/nsbox/nsbox/seccomp"
)

// RunOptions carry what a transport adds to a run request: where live
// output goes and when the answer may be sent. Every field is optional.
type RunOptions struct {
	// ID names the run; empty: a fresh container.NewID().
	ID string
	// Stdin replaces the request's Stdin text (in-process callers pass
	// their own standard input).
	Stdin io.Reader
	// OnStart is called with the run's id once the run is admitted and its
	// rootfs resolved, before the sandbox starts.
	OnStart func(id string)
	// OnStdout and OnStderr receive output live, as the run produces it.
	OnStdout, OnStderr func([]byte)
	// OnResult is called exactly once with the result when Run succeeds,
	// once the run's slot is let go and a finished Python sandbox's
	// teardown has started in the background: the answer does not wait
	// for the teardown, and the slot does not wait for the answer.
	OnResult func(*agentapi.RunResult)
	// Seccomp replaces the engine's default filter (in-process callers
	// with their own profile; no wire request can set it).
	Seccomp seccomp.Program

	// waitForSlot: wait for a run slot however full the queue is (a
	// batch's runs, at most max_concurrent at once: see RunBatch).
	waitForSlot bool
}

// Run runs one request to its end: validate, admit (a run slot, waiting in
// the queue if there is room), resolve the rootfs, run on a warm runner, a
// zygote child or a cold sandbox, and report. A Python run that ended on
// its own is answered (OnResult) while its sandbox's teardown goes on in
// the background holding a teardown token or the run slot.
func (d *Daemon) Run(ctx context.Context, req *agentapi.RunRequest, opts RunOptions) (*agentapi.RunResult, error) {
	if err := d.admit(); err != nil {
		return nil, err
	}
	j, err := d.pol.Load().Validate(req)
	if err != nil {
		d.metrics.Run("invalid")
		return nil, err
	}
	// Code of a language with a runner kind goes to a runner; an argv run,
	// code whose language has none, or a run with an init, to the engine.
	viaRunner := d.cfg.Starter != nil && j.Lang != nil && j.Lang.Runner != "" && opts.Seccomp == nil && !j.Init
	if j.Lang != nil && j.Lang.Runner == "" && !j.Lang.HasOneShot() {
		d.metrics.Run("invalid")
		return nil, errdefs.Field("language", "%s runs only beside a session's interpreter, in contexts (E2B's code interpreter: runCode with language %q); a run of it is not supported",
			j.Language, j.Language)
	}
	if j.Lang != nil && !viaRunner && !j.Lang.HasOneShot() {
		d.metrics.Run("invalid")
		return nil, errdefs.Field("language", "%s needs its runner (%s), and this run goes to the engine directly (a custom seccomp filter, init, or no runner); run it without those",
			j.Language, j.Lang.Runner)
	}
	if j.AllowedImports != nil && !viaRunner {
		d.metrics.Run("invalid")
		return nil, errdefs.Field("allowed_imports", "needs the Python runner, and this run goes to the engine directly (a custom seccomp filter, init, or no runner); drop allowed_imports, the custom filter or init")
	}
	id := opts.ID
	if id == "" {
		id = container.NewID()
	}
	log := d.log.With("run", id)

	queued := time.Now()
	acquire := d.adm.Acquire
	if opts.waitForSlot {
		acquire = d.adm.AcquireWaiting
	}
	release, err := acquire(ctx)
	if err != nil {
		if errors.Is(err, ErrBusy) {
			d.metrics.Run("rejected")
		}
		return nil, err
	}
	// The run's output caps are reserved before it starts, and its
	// outputs' size held until its answer is written (the result budget).
	// Runs at the default caps or below are bounded by their slots alone,
	// so that big results, or a client not taking one, never hold up
	// small runs.
	var reserved *admission.Reservation
	if resultBytes := 2 * j.Limits.OutputBytes; resultBytes > smallResult {
		if reserved, err = d.results.Acquire(ctx, resultBytes, d.adm.Stopping()); err != nil {
			release()
			return nil, err
		}
		defer reserved.Release()
	}
	d.metrics.QueueWait(time.Since(queued))
	dir, releaseRootfs, err := d.acquireRootfs(j.Rootfs)
	if err != nil {
		release()
		d.metrics.Run("invalid")
		return nil, err
	}
	// The volumes are held, like the rootfs, until the sandbox is gone.
	mounts, releaseRootfs, err := d.mounts(ctx, req.Volumes, req.Datasets, releaseRootfs)
	if err != nil {
		releaseRootfs()
		release()
		d.metrics.Run("invalid")
		return nil, err
	}
	// The slot and the rootfs are held until the sandbox is gone, unless
	// a Python run's teardown gets a teardown token (tearDown).
	done := func() { releaseRootfs(); release() }

	var spec container.Spec
	if viaRunner {
		spec = j.CellSpec(id, dir)
	} else {
		spec = j.Spec(id, dir)
	}
	spec.Mounts = mounts
	spec.Seccomp = opts.Seccomp
	switch {
	case opts.Stdin != nil:
		spec.Stdin = opts.Stdin
	case j.Stdin != "":
		spec.Stdin = strings.NewReader(j.Stdin)
	}
	nr, err := d.startEgress(&spec, j.Network)
	if err != nil {
		done()
		return nil, classify(err)
	}
	if opts.OnStart != nil {
		opts.OnStart(id)
	}
	what := []any{"language", j.Language}
	if j.Lang == nil || !viaRunner {
		what = []any{"argv0", spec.Argv[0]}
	}
	log.Info("run started", append(append(callerAttrs(ctx), what...), "rootfs", j.Rootfs, "queue_wait", time.Since(queued))...)
	started := time.Now()

	var (
		out       *agentapi.RunResult
		closeLate func()
	)
	if viaRunner {
		out, closeLate, err = d.runCell(ctx, spec, j, opts)
	} else {
		if opts.OnStdout != nil {
			spec.Stdout = funcWriter(opts.OnStdout)
		}
		if opts.OnStderr != nil {
			spec.Stderr = funcWriter(opts.OnStderr)
		}
		var res *container.Result
		if res, err = d.cfg.Engine.Run(ctx, spec); err == nil {
			out = wire.Result(res, id)
		}
	}
	if report := d.takeEgress(nr, true); out != nil {
		out.Network = report
	}
	d.finished(ctx, log, started, out, err)
	if reserved != nil && out != nil {
		reserved.Shrink(int64(len(out.Stdout) + len(out.Stderr) + len(out.StdoutBase64) + len(out.StderrBase64)))
	}
	if err != nil {
		done()
		return nil, runError(j, err)
	}
	// The slot and the sandbox are let go before the answer is written, so
	// that a client slow to take it (or one that never does, until the
	// transport's write deadline) holds neither.
	if closeLate == nil { // the sandbox is gone already
		done()
	} else {
		d.tearDown(closeLate, releaseRootfs, release)
	}
	if opts.OnResult != nil {
		opts.OnResult(out)
	}
	return out, nil
}

// finished counts and logs a run's outcome. Only the daemon's own
// failures count as spawn failures (the metric to alert on): a command
// the kernel would not execute, or a caller gone, is not one.
func (d *Daemon) finished(ctx context.Context, log *slog.Logger, started time.Time, out *agentapi.RunResult, err error) {
	d.metrics.RunTime(time.Since(started))
	switch {
	case err == nil:
		d.metrics.Run(out.Status)
		log.Info("run finished", "status", out.Status, "exit_code", out.ExitCode, "wall_ms", out.WallMs, "pooled", out.Pooled)
	case errors.Is(classify(err), errdefs.ErrInvalidArgument):
		d.metrics.Run("invalid")
		log.Info("run refused", "err", err)
	default:
		d.metrics.Run("setup_error")
		if ownFailure(ctx, err) {
			d.metrics.SpawnFailure()
			log.Error("run failed", "err", err)
		} else {
			log.Info("run failed", "err", err)
		}
	}
}

// tearDown closes a finished run's sandbox in the background, then
// releases its rootfs. With a teardown token the run slot is freed now;
// with none left, once the sandbox is gone, so that live sandboxes stay
// bounded by twice MaxConcurrent. Close waits for every teardown.
func (d *Daemon) tearDown(closeSandbox, releaseRootfs, releaseSlot func()) {
	d.closing.Add(1)
	select {
	case d.teardowns <- struct{}{}:
		d.tearing.Add(1)
		releaseSlot()
		go func() {
			defer d.closing.Done()
			defer func() { d.tearing.Add(-1); <-d.teardowns }()
			closeSandbox()
			releaseRootfs()
		}()
	default:
		go func() {
			defer d.closing.Done()
			closeSandbox()
			releaseRootfs()
			releaseSlot()
		}()
	}
}

// smallResult is the result reservation below which a run takes nothing
// from the result budget: the default caps' (2 × 1 MiB).
const smallResult = 2 << 20

// funcWriter adapts an output callback to the engine's io.Writer.
type funcWriter func([]byte)

func (f funcWriter) Write(p []byte) (int, error) {
	f(p)
	return len(p), nil
}
