package daemon

import (
	"context"
	"errors"
	"path"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// ErrWatchEnded: the watched directory went (or the watch was closed).
var ErrWatchEnded = procs.ErrWatchEnded

// Watch is a directory of a session's sandbox, watched inside it by its
// process agent, as its user (procs.Agent.Watch).
type Watch struct {
	w   *procs.Watch
	Dir string // the watched directory, as the sandbox names it
}

// WatchDir watches dir, a path relative to the session's workspace (""
// the workspace itself), recursive or not. The session needs a process
// agent (SessionRequest.Processes). The path is resolved in the sandbox
// as its user resolves it: no host path can be watched.
func (d *Daemon) WatchDir(ctx context.Context, id, dir string, recursive bool) (*Watch, error) {
	abs := "/workspace"
	if dir != "" && dir != "." {
		if err := container.ValidPath(dir); err != nil {
			return nil, errdefs.Field("path", "%v", err)
		}
		abs = path.Join(abs, dir)
	}
	a, err := d.Processes(ctx, id)
	if err != nil {
		return nil, err
	}
	w, err := a.Watch(ctx, abs, recursive)
	if err != nil {
		return nil, watchError(err)
	}
	return &Watch{w: w, Dir: abs}, nil
}

// Next waits for changes and returns them in order (an overflow where
// some were lost); ErrWatchEnded once the directory went, another error
// once the session ended.
func (w *Watch) Next(ctx context.Context) ([]agentapi.WatchEvent, error) {
	evs, err := w.w.Next(ctx)
	if err != nil {
		return nil, watchError(err)
	}
	out := make([]agentapi.WatchEvent, len(evs))
	for i, e := range evs {
		out[i] = agentapi.WatchEvent{Type: e.Op, Name: e.Name}
	}
	return out, nil
}

// Close ends the watch.
func (w *Watch) Close() error { return w.w.Close() }

// watchError classes the agent's errors: a missing directory is not
// found, a file an invalid argument, too many watches exhausted, the
// session gone dead.
func watchError(err error) error {
	var fe *procs.FileError
	if errors.As(err, &fe) {
		switch fe.Errno {
		case unix.ENOENT:
			return errdefs.In(errdefs.ErrNotFound, err)
		case unix.ENOTDIR, unix.E2BIG, unix.ELOOP, unix.ENAMETOOLONG:
			return errdefs.In(errdefs.ErrInvalidArgument, err)
		case unix.EMFILE:
			return errdefs.In(errdefs.ErrExhausted, err)
		}
		return err
	}
	return classify(err)
}
