package envd

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/nsbox/nsbox/agentapi/e2b/envd/filesystem"
	"github.com/nsbox/nsbox/agentapi/e2b/envd/watchers"
	"github.com/nsbox/nsbox/container/procs"
)

// Watches are the agent's (procs.Agent.Watch): inotify inside the
// sandbox, as its user, so a watch sees the sandbox's files as a command
// would and no host path; package watchers serves them as envd's.

// watch starts watching the directory p names (relative: to /home/user);
// it returns the watch and the directory's sandbox path.
func (fs *filesystemService) watch(ctx context.Context, p string, recursive bool) (*procs.Watch, string, error) {
	t, err := sandboxTarget("path", p)
	if err != nil {
		return nil, "", connectError(err)
	}
	var w *procs.Watch
	err = fs.s.inSandbox(ctx, func(a *procs.Agent) (err error) {
		w, err = a.Watch(ctx, t.abs, recursive)
		return err
	})
	if err != nil {
		return nil, "", connectError(err)
	}
	return w, t.abs, nil
}

// entry is an event's entry info (include_entry), as the agent describes
// the path; nil when it went meanwhile.
func (fs *filesystemService) entry(sandbox string) watchers.Entry {
	return func(ctx context.Context, p string) *filesystem.EntryInfo {
		a, err := fs.s.core.Processes(ctx, sandbox)
		if err != nil {
			return nil
		}
		e, err := a.Stat(ctx, p)
		if err != nil {
			return nil
		}
		return agentEntryInfo(*e)
	}
}

func (fs *filesystemService) WatchDir(ctx context.Context, req *connect.Request[filesystem.WatchDirRequest], stream *connect.ServerStream[filesystem.WatchDirResponse]) error {
	w, dir, err := fs.watch(ctx, req.Msg.GetPath(), req.Msg.GetRecursive())
	if err != nil {
		return err
	}
	var entry watchers.Entry
	if req.Msg.GetIncludeEntry() {
		entry = fs.entry(fs.s.id(ctx))
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-fs.s.cfg.Stopping: // nil: never
			cancel()
		case <-sctx.Done():
		}
	}()
	err = watchers.Stream(sctx, w, dir, entry, keepalive(req.Header()), stream.Send)
	if ctx.Err() == nil && sctx.Err() != nil {
		return connect.NewError(connect.CodeUnavailable, errors.New("the daemon is shutting down"))
	}
	return err
}

func (fs *filesystemService) CreateWatcher(ctx context.Context, req *connect.Request[filesystem.CreateWatcherRequest]) (*connect.Response[filesystem.CreateWatcherResponse], error) {
	w, dir, err := fs.watch(ctx, req.Msg.GetPath(), req.Msg.GetRecursive())
	if err != nil {
		return nil, err
	}
	id := fs.s.id(ctx)
	var entry watchers.Entry
	if req.Msg.GetIncludeEntry() {
		entry = fs.entry(id)
	}
	return connect.NewResponse(&filesystem.CreateWatcherResponse{WatcherId: fs.s.watchers.Create(id, w, dir, entry)}), nil
}

func (fs *filesystemService) GetWatcherEvents(ctx context.Context, req *connect.Request[filesystem.GetWatcherEventsRequest]) (*connect.Response[filesystem.GetWatcherEventsResponse], error) {
	evs, err := fs.s.watchers.Events(fs.s.id(ctx), req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.GetWatcherEventsResponse{Events: evs}), nil
}

func (fs *filesystemService) RemoveWatcher(ctx context.Context, req *connect.Request[filesystem.RemoveWatcherRequest]) (*connect.Response[filesystem.RemoveWatcherResponse], error) {
	if err := fs.s.watchers.Remove(fs.s.id(ctx), req.Msg.GetWatcherId()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.RemoveWatcherResponse{}), nil
}
