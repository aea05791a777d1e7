package envd

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/nsbox/nsbox/agentapi/e2b/envd/filesystem"
	"github.com/nsbox/nsbox/agentapi/e2b/envd/filesystem/filesystemconnect"
	"github.com/nsbox/nsbox/container/procs"
)

// watchServer serves envd's filesystem service over one process agent
// (on the host, for the protocol; the sandbox's side is container/procs'
// TestWatch*).
func watchServer(t *testing.T) (filesystemconnect.FilesystemClient, *procs.Agent) {
	t.Helper()
	a := hostAgent(t)
	h := newHandler(t, &agentCore{a: a})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sandboxKey{}, Sandbox{ID: "sb"})))
	}))
	t.Cleanup(srv.Close)
	return filesystemconnect.NewFilesystemClient(srv.Client(), srv.URL), a
}

// inotifyCount counts the inotify descriptors of the host process pid.
func inotifyCount(t *testing.T, pid int) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, _ := os.Readlink(filepath.Join(dir, e.Name())); l == "anon_inode:inotify" {
			n++
		}
	}
	return n
}

type fsEvent struct {
	typ  filesystem.EventType
	name string
}

// TestWatchDir: WatchDir starts with a start event, then passes a create,
// a write, a rename and a remove in order, named relative to the watched
// directory, with entry info when asked; a missing directory is
// not_found and a file invalid_argument; the agent's inotify descriptor
// is gone once the client goes.
func TestWatchDir(t *testing.T) {
	c, a := watchServer(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for p, want := range map[string]connect.Code{dir + "/missing": connect.CodeNotFound, "/etc/hostname": connect.CodeInvalidArgument} {
		st, err := c.WatchDir(ctx, connect.NewRequest(&filesystem.WatchDirRequest{Path: p}))
		if err == nil {
			st.Receive()
			err = st.Err()
			st.Close()
		}
		if connect.CodeOf(err) != want {
			t.Errorf("WatchDir(%s): %v, want %v", p, err, want)
		}
	}
	sctx, stop := context.WithCancel(ctx)
	st, err := c.WatchDir(sctx, connect.NewRequest(&filesystem.WatchDirRequest{Path: dir, IncludeEntry: true}))
	if err != nil {
		t.Fatal(err)
	}
	if !st.Receive() || st.Msg().GetStart() == nil {
		t.Fatalf("first message %v, %v: want the start event", st.Msg(), st.Err())
	}
	// The stream's handler, and its goroutine waiting for the daemon's stop.
	if n, g := inotifyCount(t, a.Pid()), watchGoroutines(); n != 1 || g != 2 {
		t.Errorf("while watching: %d inotify descriptors, %d goroutines of the watch; want 1 and 2", n, g)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "a"), nil, 0o644))
	f, err := os.OpenFile(filepath.Join(dir, "a"), os.O_WRONLY|os.O_APPEND, 0)
	must(err)
	_, err = f.WriteString("x")
	must(err)
	must(f.Close())
	var got []fsEvent
	var write *filesystem.FilesystemEvent
	receive := func(n int) {
		t.Helper()
		for len(got) < n && st.Receive() {
			e := st.Msg().GetFilesystem()
			got = append(got, fsEvent{e.GetType(), e.GetName()})
			if e.GetType() == filesystem.EventType_EVENT_TYPE_WRITE {
				write = e
			}
		}
	}
	receive(2) // a is described while it is there
	must(os.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "b")))
	must(os.Remove(filepath.Join(dir, "b")))
	receive(5)
	want := []fsEvent{
		{filesystem.EventType_EVENT_TYPE_CREATE, "a"}, {filesystem.EventType_EVENT_TYPE_WRITE, "a"},
		{filesystem.EventType_EVENT_TYPE_RENAME, "a"}, {filesystem.EventType_EVENT_TYPE_CREATE, "b"},
		{filesystem.EventType_EVENT_TYPE_REMOVE, "b"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("events %v (%v), want %v", got, st.Err(), want)
	}
	if write == nil || write.GetEntry() == nil || write.GetEntry().GetPath() != filepath.Join(dir, "a") {
		t.Errorf("write event %v: want a's entry", write)
	}
	stop()
	st.Close()
	// The handler closes the watch once it sees the client go; the agent
	// then closes its descriptor.
	deadline := time.Now().Add(time.Minute)
	for inotifyCount(t, a.Pid()) != 0 || watchGoroutines() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the client went: %d inotify descriptors in the agent, %d goroutines of the watch", inotifyCount(t, a.Pid()), watchGoroutines())
		}
		if _, err := a.Stat(ctx, dir); err != nil { // a round trip through the agent
			t.Fatal(err)
		}
	}
}

// watchGoroutines counts the goroutines in a watch's code: the stream's
// handler, a polled watcher's reader.
func watchGoroutines() int {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	n := 0
	for _, g := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(g, "envd/watchers.") || strings.Contains(g, "envd.(*filesystemService).WatchDir") {
			n++
		}
	}
	return n
}

// TestWatchDirKeepalive: an idle watch sends keepalives at the interval
// the SDK asks for (Keepalive-Ping-Interval), as envd's, so that proxies
// and the SDK's idle timers see it alive.
func TestWatchDirKeepalive(t *testing.T) {
	c, _ := watchServer(t)
	req := connect.NewRequest(&filesystem.WatchDirRequest{Path: t.TempDir()})
	req.Header().Set("Keepalive-Ping-Interval", "1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := c.WatchDir(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := 0; i < 3; i++ {
		if !st.Receive() {
			t.Fatalf("the stream ended: %v", st.Err())
		}
		if i > 0 && st.Msg().GetKeepalive() == nil {
			t.Fatalf("message %d of an idle watch: %v, want a keepalive", i, st.Msg())
		}
	}
}

// TestWatcherPolled: CreateWatcher, GetWatcherEvents and RemoveWatcher
// (the polled watch): events come in order, each once; a removed watcher
// is not_found and holds nothing; a watcher of a sandbox that ended is
// forgotten.
func TestWatcherPolled(t *testing.T) {
	c, a := watchServer(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cw, err := c.CreateWatcher(ctx, connect.NewRequest(&filesystem.CreateWatcherRequest{Path: dir, Recursive: true}))
	if err != nil {
		t.Fatal(err)
	}
	id := cw.Msg.GetWatcherId()
	if g := watchGoroutines(); g != 1 {
		t.Errorf("goroutines of a polled watcher: %d, want 1", g)
	}
	if err := os.MkdirAll(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	var got []fsEvent
	poll := func() {
		t.Helper()
		r, err := c.GetWatcherEvents(ctx, connect.NewRequest(&filesystem.GetWatcherEventsRequest{WatcherId: id}))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range r.Msg.GetEvents() {
			got = append(got, fsEvent{e.GetType(), e.GetName()})
		}
	}
	for len(got) == 0 {
		poll()
	}
	// d is watched once its create was reported.
	if err := os.WriteFile(filepath.Join(dir, "d", "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for len(got) < 3 {
		poll()
	}
	want := []fsEvent{{filesystem.EventType_EVENT_TYPE_CREATE, "d"}, {filesystem.EventType_EVENT_TYPE_CREATE, "d/f"}, {filesystem.EventType_EVENT_TYPE_WRITE, "d/f"}}
	if !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if _, err := c.RemoveWatcher(ctx, connect.NewRequest(&filesystem.RemoveWatcherRequest{WatcherId: id})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetWatcherEvents(ctx, connect.NewRequest(&filesystem.GetWatcherEventsRequest{WatcherId: id})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("GetWatcherEvents after RemoveWatcher: %v", err)
	}
	if n := inotifyCount(t, a.Pid()); n != 0 {
		t.Errorf("inotify descriptors after RemoveWatcher: %d", n)
	}
	for deadline := time.Now().Add(time.Minute); watchGoroutines() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the removed watcher's reader still runs a minute later")
		}
		runtime.Gosched()
	}
	// A watcher whose sandbox ends is forgotten.
	cw, err = c.CreateWatcher(ctx, connect.NewRequest(&filesystem.CreateWatcherRequest{Path: dir}))
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	for {
		_, err := c.GetWatcherEvents(ctx, connect.NewRequest(&filesystem.GetWatcherEventsRequest{WatcherId: cw.Msg.GetWatcherId()}))
		if connect.CodeOf(err) == connect.CodeNotFound {
			break
		}
		if err != nil && connect.CodeOf(err) != connect.CodeUnavailable {
			t.Fatalf("GetWatcherEvents of a watcher whose sandbox ended: %v", err)
		}
		if ctx.Err() != nil {
			t.Fatal("a watcher whose sandbox ended is still held")
		}
	}
}

// TestWatchDirEndsAtStop: a watch stream ends, unavailable, as soon as
// the daemon starts to stop (Config.Stopping), rather than hold up its
// drain: a watch has nothing to finish.
func TestWatchDirEndsAtStop(t *testing.T) {
	stopping := make(chan struct{})
	h, err := New(Config{
		Core: &agentCore{a: hostAgent(t)}, MaxUploadBytes: 1 << 20, UploadTimeout: time.Minute, Stopping: stopping,
		Sandbox: func(ctx context.Context) Sandbox { return Sandbox{ID: "sb"} },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := filesystemconnect.NewFilesystemClient(srv.Client(), srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := c.WatchDir(ctx, connect.NewRequest(&filesystem.WatchDirRequest{Path: t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.Receive() || st.Msg().GetStart() == nil {
		t.Fatalf("first message %v, %v", st.Msg(), st.Err())
	}
	close(stopping)
	for st.Receive() {
	}
	if connect.CodeOf(st.Err()) != connect.CodeUnavailable {
		t.Errorf("the stream ended with %v, want unavailable", st.Err())
	}
}
