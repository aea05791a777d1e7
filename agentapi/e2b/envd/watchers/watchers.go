// Package watchers is envd's directory watches over a sandbox's process
// agent: Filesystem.WatchDir (a stream) and CreateWatcher,
// GetWatcherEvents and RemoveWatcher (polled), which the SDKs'
// files.watchDir use. The agent watches inside the sandbox, as its user
// (procs.Agent.Watch); this package turns its events into envd's.
package watchers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/nsbox/nsbox/agentapi/e2b/envd/filesystem"
	"github.com/nsbox/nsbox/container/procs"
)

// Entry describes the entry at a sandbox path for an event's entry info
// (include_entry); nil when it cannot (it went meanwhile), as envd's
// best-effort entry.
type Entry func(ctx context.Context, path string) *filesystem.EntryInfo

// ErrOverflow: the watch lost events (its queue or the kernel's filled)
// and ends, saying so, rather than go on with a gap its client cannot see.
var ErrOverflow = errors.New("the watch fell behind and lost events (more than it could hold); watch again and list the directory")

// types are envd's event types of the agent's operations.
var types = map[string]filesystem.EventType{
	procs.WatchCreate: filesystem.EventType_EVENT_TYPE_CREATE,
	procs.WatchWrite:  filesystem.EventType_EVENT_TYPE_WRITE,
	procs.WatchRemove: filesystem.EventType_EVENT_TYPE_REMOVE,
	procs.WatchRename: filesystem.EventType_EVENT_TYPE_RENAME,
	procs.WatchChmod:  filesystem.EventType_EVENT_TYPE_CHMOD,
}

// carriesEntry: the types whose event has an entry with include_entry
// (envd's opCarriesEntry).
func carriesEntry(t filesystem.EventType) bool {
	switch t {
	case filesystem.EventType_EVENT_TYPE_CREATE, filesystem.EventType_EVENT_TYPE_WRITE, filesystem.EventType_EVENT_TYPE_CHMOD:
		return true
	}
	return false
}

// convert turns the agent's events of the watch of dir into envd's;
// an overflow is ErrOverflow, after the events before it.
func convert(ctx context.Context, dir string, evs []procs.WatchEvent, entry Entry) ([]*filesystem.FilesystemEvent, error) {
	out := make([]*filesystem.FilesystemEvent, 0, len(evs))
	for _, e := range evs {
		if e.Op == procs.WatchOverflow {
			return out, ErrOverflow
		}
		t, ok := types[e.Op]
		if !ok {
			continue
		}
		fe := &filesystem.FilesystemEvent{Name: e.Name, Type: t}
		if entry != nil && carriesEntry(t) {
			fe.Entry = entry(ctx, path.Join(dir, e.Name))
		}
		out = append(out, fe)
	}
	return out, nil
}

// endError is a watch's end as envd's stream or poll reports it: nil when
// it was closed or its directory went.
func endError(err error) error {
	switch {
	case errors.Is(err, procs.ErrWatchEnded):
		return nil
	case errors.Is(err, ErrOverflow):
		return connect.NewError(connect.CodeResourceExhausted, err)
	case errors.Is(err, procs.ErrClosed):
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("the sandbox ended: %w", err))
	}
	return err
}

// Stream sends w's events of the directory dir as WatchDir does: a start
// event, then each event, and a keepalive after every idle interval
// every, until the client goes or its request's timeout passes (Connect
// canceled or deadline_exceeded, as envd's), the directory goes (a clean
// end), the sandbox ends (unavailable) or the watch overflows
// (resource_exhausted: events were lost). It closes w.
func Stream(ctx context.Context, w *procs.Watch, dir string, entry Entry, every time.Duration, send func(*filesystem.WatchDirResponse) error) error {
	defer w.Close()
	if err := send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Start{Start: &filesystem.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	for {
		nctx, cancel := context.WithTimeout(ctx, every)
		evs, err := w.Next(nctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ended(ctx.Err())
		case errors.Is(err, context.DeadlineExceeded):
			err = send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Keepalive{Keepalive: &filesystem.WatchDirResponse_KeepAlive{}}})
			if err != nil {
				return err
			}
			continue
		case err != nil:
			return endError(err)
		}
		out, cerr := convert(ctx, dir, evs, entry)
		for _, fe := range out {
			if err := send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Filesystem{Filesystem: fe}}); err != nil {
				return err
			}
		}
		if cerr != nil {
			return endError(cerr)
		}
	}
}

// ended is the Connect error of a stream whose request's context ended.
func ended(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return connect.NewError(connect.CodeDeadlineExceeded, errors.New("the request's timeout passed; the watch ended"))
	}
	return connect.NewError(connect.CodeCanceled, err)
}

// Registry holds the polled watchers of every sandbox, by sandbox and
// watcher id. A watcher ends at RemoveWatcher, or with its sandbox (its
// agent closed): then it is forgotten.
type Registry struct {
	mu   sync.Mutex
	byID map[string]*poller // sandbox id + "/" + watcher id
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{byID: map[string]*poller{}} }

// poller is one polled watcher: what its watch gave since the last poll.
type poller struct {
	w      *procs.Watch
	cancel context.CancelFunc
	mu     sync.Mutex
	events []*filesystem.FilesystemEvent
	err    error // the watch's end (nil: still running, or ended cleanly)
}

// Create starts polling w, of the directory dir in the sandbox sandbox,
// and returns the watcher's id. Its events are kept until polled, at most
// procs.MaxWatchQueue of them: past that it ends with ResourceExhausted.
func (r *Registry) Create(sandbox string, w *procs.Watch, dir string, entry Entry) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := "w" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithCancel(context.Background())
	p := &poller{w: w, cancel: cancel}
	key := sandbox + "/" + id
	r.mu.Lock()
	r.byID[key] = p
	r.mu.Unlock()
	go func() {
		defer w.Close()
		for {
			evs, err := w.Next(ctx)
			if err == nil {
				var out []*filesystem.FilesystemEvent
				out, err = convert(ctx, dir, evs, entry)
				p.mu.Lock()
				if len(p.events)+len(out) > procs.MaxWatchQueue {
					out, err = nil, ErrOverflow
				}
				p.events = append(p.events, out...)
				p.mu.Unlock()
			}
			if err == nil {
				continue
			}
			p.mu.Lock()
			p.err = endError(err)
			p.mu.Unlock()
			if errors.Is(err, procs.ErrClosed) { // the sandbox went: nobody can poll
				r.mu.Lock()
				delete(r.byID, key)
				r.mu.Unlock()
			}
			return
		}
	}()
	return id
}

// Events returns and forgets the events of a watcher since the last call
// (envd's GetWatcherEvents); once its watch ended in error, that error.
func (r *Registry) Events(sandbox, id string) ([]*filesystem.FilesystemEvent, error) {
	r.mu.Lock()
	p := r.byID[sandbox+"/"+id]
	r.mu.Unlock()
	if p == nil {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher with id %s not found", id))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil && len(p.events) == 0 {
		return nil, p.err
	}
	evs := p.events
	p.events = nil
	return evs, nil
}

// Remove ends a watcher and forgets it.
func (r *Registry) Remove(sandbox, id string) error {
	r.mu.Lock()
	p := r.byID[sandbox+"/"+id]
	delete(r.byID, sandbox+"/"+id)
	r.mu.Unlock()
	if p == nil {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher with id %s not found", id))
	}
	p.cancel()
	return p.w.Close()
}

// Len is the number of watchers held (for tests: none left behind).
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byID)
}
