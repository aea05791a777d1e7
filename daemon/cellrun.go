package daemon

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/pool"
	"github.com/nsbox/nsbox/container/runner"
	"github.com/nsbox/nsbox/container/zygote"
	"github.com/nsbox/nsbox/daemon/policy"
	"github.com/nsbox/nsbox/daemon/wire"
)

// runCell runs a run's code as one cell of a runner of its language's
// kind (daemon/lang: Python, Node.js for JavaScript and TypeScript), so
// that it gets the same rich result as a session exec: on a pooled runner
// when one
// matches, else on one started for it (by the Starter: a zygote's child or
// a cold sandbox). The sandbox lives a little longer than the code's
// timeout: room for the KeyboardInterrupt's traceback.
//
// A run whose cell ended on its own (ok or an exception) returns its
// sandbox's teardown as closeLate, for the caller to run once the answer
// is out.
//
// A run whose zygote child died with its zygote (killed or crashed under
// it) before anything of it reached the caller is run once more, cold or
// from the zygote that replaced it: the sandbox it ran in is gone with
// everything it did, and the caller sees one run. One whose output was
// already streamed is reported as it ended (killed), with the reason.
func (d *Daemon) runCell(ctx context.Context, spec container.Spec, j *policy.Job, opts RunOptions) (*agentapi.RunResult, func(), error) {
	var delivered atomic.Bool
	for _, f := range []*func([]byte){&opts.OnStdout, &opts.OnStderr} {
		if next := *f; next != nil {
			*f = func(b []byte) { delivered.Store(true); next(b) }
		}
	}
	out, closeLate, sb, err := d.runCellOn(ctx, spec, j, opts, true)
	if sb == nil || ctx.Err() != nil || !lostRun(out, err) || !sb.ZygoteLost(zygoteNews) {
		return out, closeLate, err
	}
	if delivered.Load() {
		if out == nil {
			return nil, nil, err
		}
		out.Error = "the zygote this run was forked from died under it (it is being restarted); the run's output had been streamed already, so it was not run again"
		return out, closeLate, err
	}
	d.log.Warn("the zygote died under a run before it answered; running it again", "run", spec.ID, "status", statusOf(out), "err", err)
	d.metrics.ZygoteRerun()
	out, closeLate, _, err = d.runCellOn(ctx, spec, j, opts, false)
	return out, closeLate, err
}

// zygoteNews is how long a run whose zygote child died waits for the news
// that the zygote died too (container.Sandbox.ZygoteLost).
const zygoteNews = 100 * time.Millisecond

// lostRun reports an outcome a zygote child's death gives: an error from
// the runner, or a run killed or crashed.
func lostRun(out *agentapi.RunResult, err error) bool {
	return err != nil || out.Status == agentapi.StatusKilled || out.Status == agentapi.StatusCrashed
}

func statusOf(out *agentapi.RunResult) string {
	if out == nil {
		return ""
	}
	return out.Status
}

// runCellOn is runCell's one attempt, on a pooled runner when pooled
// allows and one matches; it returns the sandbox it ran in.
func (d *Daemon) runCellOn(ctx context.Context, spec container.Spec, j *policy.Job, opts RunOptions, pooled bool) (_ *agentapi.RunResult, closeLate func(), _ *container.Sandbox, _ error) {
	lim := spec.Limits.WithDefaults()
	spec.Limits = lim
	kind := j.Lang.Runner
	cell := runner.ExecRequest{Code: j.Code, AllowedImports: j.AllowedImports, Transform: j.Lang.Transform}
	var tk *pool.Taken
	// A networked run, or one with mounts, needs its own sandbox set up.
	if pooled && spec.BeforeStart == nil && len(spec.Mounts) == 0 {
		tk = d.takePooled(j.Rootfs, spec, kind)
	}
	if tk != nil {
		d.log.Debug("run takes a pooled runner", "run", spec.ID, "sandbox", tk.Sandbox().ID(), "pool", tk.Profile, "waited", tk.Waited)
		ws := tk.Sandbox().Workspace()
		for _, f := range spec.Files {
			if err := ws.WriteFile(f.Path, f.Data, f.Mode); err != nil {
				tk.Kill(container.StatusError)
				return nil, nil, nil, fmt.Errorf("input file %s: %w", f.Path, err)
			}
		}
		out, closeLate, err := d.runOn(ctx, tk, spec, cell, opts, tk.CPUBefore)
		if err == nil {
			out.Pooled = true
		}
		return out, closeLate, tk.Sandbox(), err
	}
	started := time.Now()
	if j.Lang.Zygote() {
		spec.Imports = zygote.Imports(j.Code) // which zygote forks it
	}
	spec.Limits.Timeout += runner.InterruptGrace + time.Second
	rn, err := runner.StartLang(ctx, d.cfg.Starter, spec, kind) // writes spec.Files
	if err != nil {
		return nil, nil, nil, err
	}
	spec.Limits = lim
	out, closeLate, err := d.runOn(ctx, rn, spec, cell, opts, 0)
	if err == nil {
		out.WallMs = time.Since(started).Milliseconds() // the sandbox's start included
	}
	return out, closeLate, rn.Sandbox(), err
}

// singleUse is a runner serving one run: a pooled one (*pool.Taken) or
// one started for the run (*runner.Runner).
type singleUse interface {
	Exec(ctx context.Context, req runner.ExecRequest) (*runner.Result, error)
	Sandbox() *container.Sandbox
	Language() runner.Language
	Dead() (runner.Status, string)
	Close() (*container.Result, error)
	Kill(v container.Status) (*container.Result, error)
}

// runOn runs the cell on r, whose workspace already has the input files; the
// time limit counts from the hand-over. The result's wall time is the
// code's alone and its CPU time the sandbox's since cpuBefore (what a
// pooled runner spent before it was taken). When the cell ended on its own
// (ok or an exception) the answer does not wait for the teardown: it is
// returned as closeLate, for once the answer is out.
func (d *Daemon) runOn(ctx context.Context, tk singleUse, spec container.Spec, req runner.ExecRequest, opts RunOptions, cpuBefore time.Duration) (_ *agentapi.RunResult, closeLate func(), _ error) {
	ws := tk.Sandbox().Workspace()
	before, serr := ws.Snapshot()
	// A flood past the cap kills the sandbox at once: the run is over.
	req.Timeout, req.OutputBytes, req.KillOnOverflow = spec.Limits.Timeout, spec.Limits.OutputBytes, true
	// So does a timeout (or a cancel) where the runner kind's interrupt
	// is not cheap (runner.Language.CheapInterrupt: Node's); the status
	// is timeout either way. Python's interrupt is cheap and its run
	// reports the KeyboardInterrupt's traceback.
	req.KillOnTimeout = !tk.Language().CheapInterrupt()
	req.OnStdout, req.OnStderr = opts.OnStdout, opts.OnStderr
	res, err := tk.Exec(ctx, req)
	if err != nil {
		tk.Kill(container.StatusKilled)
		return nil, nil, err
	}
	var files []container.FileInfo
	var filesCut bool
	if serr == nil {
		files, filesCut, serr = ws.Changed(before, spec.ReturnFiles)
	}
	if serr != nil {
		d.log.Warn("workspace changes", "run", spec.ID, "err", serr)
	}

	var cres *container.Result
	if dead, _ := tk.Dead(); dead == "" && (res.Status == runner.StatusOK || res.Status == runner.StatusException) {
		st, err := tk.Sandbox().Stats()
		if err != nil {
			d.log.Warn("cgroup stats", "run", spec.ID, "err", err)
		}
		cres = &container.Result{ID: spec.ID, Status: container.StatusOK, CPUTime: st.CPUUsage, MemoryPeakBytes: st.MemoryPeakBytes}
		id := spec.ID // not spec: its input files would live as long as the teardown
		closeLate = func() {
			if _, err := tk.Close(); err != nil {
				d.log.Warn("close runner", "run", id, "err", err)
			}
		}
	} else if cres, err = tk.Close(); err != nil {
		return nil, nil, err
	}
	out := wire.Result(cres, spec.ID)
	wire.Cell(out, res)
	out.ID, out.ExecutionCount = spec.ID, 0
	out.Status, out.ExitCode, out.Signal = runStatus(res, cres)
	if res.Error != "" && out.Error == "" && out.Status != agentapi.StatusOK {
		out.Error = res.Error
	}
	out.WallMs = res.Wall.Milliseconds()
	out.CPUMs = max(0, cres.CPUTime-cpuBefore).Milliseconds()
	out.Files, out.FilesTruncated = wire.Files(files), filesCut
	return out, closeLate, nil
}

// runStatus decides a run's status through a runner from the cell's and
// the sandbox's. The exit code and signal are those `python3 -c CODE` would
// have had as an argv run (wire.CellExit); a crash reports the sandbox's own.
func runStatus(res *runner.Result, cres *container.Result) (status string, code int, signal string) {
	switch {
	case cres.Status == container.StatusOutputLimit || res.StdoutTruncated || res.StderrTruncated:
		status = agentapi.StatusOutputLimit
	case res.Status == runner.StatusOK, res.Status == runner.StatusException, res.Status == runner.StatusTimeout,
		res.Status == runner.StatusOOM:
		status = string(res.Status)
	case cres.Status == container.StatusTimeout:
		// The sandbox's own deadline (the run's timeout and the interrupt's
		// grace) ended it before the runner's timer was seen: a daemon
		// that was stopped or starved past both.
		status = agentapi.StatusTimeout
	case res.Status == runner.StatusCancelled, cres.Signal != "":
		return agentapi.StatusKilled, cres.ExitCode, cres.Signal
	case cres.ExitCode != 0:
		return agentapi.StatusExitNonzero, cres.ExitCode, ""
	default:
		return agentapi.StatusCrashed, cres.ExitCode, cres.Signal
	}
	code, signal = wire.CellExit(status)
	return status, code, signal
}
