package procs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// A watch's events, as envd names them (fsnotify's operations), and
// Overflow: events were lost here, where it stands (the kernel's queue
// or the host's filled while the reader was behind).
const (
	WatchCreate   = "create" // a file or directory made, or moved in
	WatchWrite    = "write"  // a file written (IN_MODIFY)
	WatchRemove   = "remove" // removed ("." the watched directory itself)
	WatchRename   = "rename" // moved away (its new name, if watched, comes as a create)
	WatchChmod    = "chmod"  // its attributes changed (IN_ATTRIB)
	WatchOverflow = "overflow"
)

// MaxWatchQueue bounds the events a watch holds for its reader; past it
// the agent's events are dropped and an Overflow event stands in for
// them. The reader goroutine never waits for a watch's reader.
const MaxWatchQueue = 16384

// WatchEvent is one change in a watched directory: Name is the path
// relative to the watched directory.
type WatchEvent struct {
	Op   string `json:"op"`
	Name string `json:"name"`
}

// Watch is a directory watched inside the sandbox, by the agent, with
// inotify, as the sandbox's user. Read it with Next; Close it.
type Watch struct {
	a   *Agent
	wid uint64
	max int

	mu       sync.Mutex
	queue    []WatchEvent
	overflow bool  // events dropped since the last Next
	err      error // why it ended: nil (the directory went, or Close) or ErrClosed
	ended    bool
	wake     chan struct{} // cap 1: queue or ended changed
}

// Watch starts watching the directory at path (followed if a symlink);
// recursive watches every directory under it too, made later included.
// The agent holds at most 16 watches (EMFILE past them); a tree of more
// than 10,000 directories is refused (E2BIG).
func (a *Agent) Watch(ctx context.Context, path string, recursive bool) (*Watch, error) {
	w := &Watch{a: a, max: MaxWatchQueue, wake: make(chan struct{}, 1)}
	c := &call{watch: w}
	rep, err := a.call(ctx, request{Op: "fwatch", Path: path, Recursive: recursive}, c)
	if err != nil {
		a.mu.Lock()
		registered := w.wid != 0
		a.mu.Unlock()
		if registered {
			w.Close()
		}
		return nil, err
	}
	if rep.Error != "" {
		return nil, fileError(request{Op: "fwatch", Path: path}, rep)
	}
	return w, nil
}

// Next waits for events and returns those queued, in order; an Overflow
// event stands where events were dropped. Once the watch ended and its
// events were read it returns ErrWatchEnded (the directory went, or
// Close), or ErrClosed when the agent went (the sandbox ended).
func (w *Watch) Next(ctx context.Context) ([]WatchEvent, error) {
	for {
		w.mu.Lock()
		q := w.queue
		if w.overflow {
			q = append(q, WatchEvent{Op: WatchOverflow})
			w.overflow = false
		}
		w.queue = nil
		ended, err := w.ended, w.err
		w.mu.Unlock()
		if len(q) > 0 {
			return q, nil
		}
		if ended {
			if err == nil {
				err = ErrWatchEnded
			}
			return nil, err
		}
		select {
		case <-w.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close stops the watch in the agent; Next then ends with ErrWatchEnded.
func (w *Watch) Close() error {
	a := w.a
	a.mu.Lock()
	wid := w.wid
	_, live := a.watches[wid]
	delete(a.watches, wid)
	a.mu.Unlock()
	w.end(nil)
	if !live {
		return nil
	}
	return a.unwatch(wid)
}

// unwatch closes the agent's watch wid, bounded as File.Close is.
func (a *Agent) unwatch(wid uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := a.fileCall(ctx, request{Op: "funwatch", Wid: wid})
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

// end marks the watch ended with err (nil: ErrWatchEnded).
func (w *Watch) end(err error) {
	w.mu.Lock()
	if !w.ended {
		w.ended, w.err = true, err
	}
	w.mu.Unlock()
	w.poke()
}

func (w *Watch) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// watchEvent passes a watch's frame on, without waiting: past the
// watch's bound its events are dropped and marked as an overflow.
func (a *Agent) watchEvent(m *message) {
	a.mu.Lock()
	w := a.watches[m.Wid]
	if w != nil && m.End {
		delete(a.watches, m.Wid)
	}
	a.mu.Unlock()
	if w == nil {
		return
	}
	if m.End {
		var err error
		if m.Error != "" {
			err = fmt.Errorf("watch: %s", m.Error)
		}
		w.end(err)
		return
	}
	w.mu.Lock()
	for _, e := range m.Ev {
		if len(w.queue) >= w.max {
			w.overflow = true
			break
		}
		w.queue = append(w.queue, WatchEvent{Op: e[0], Name: e[1]})
	}
	w.mu.Unlock()
	w.poke()
}
