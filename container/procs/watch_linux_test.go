package procs_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container/procs"
)

// run runs script with sh in the sandbox and fails unless it exits 0.
func run(t *testing.T, a *procs.Agent, script string) {
	t.Helper()
	o := collect(t, start(t, a, sh(script)))
	if o.err != nil || o.end == nil || o.end.ExitCode != 0 {
		t.Fatalf("%q: %+v %v (stderr %q)", script, o.end, o.err, o.stderr.String())
	}
}

// watchUntil reads w's events until one equal to last (included), or
// fails at the deadline of ctx.
func watchUntil(ctx context.Context, t *testing.T, w *procs.Watch, last procs.WatchEvent) []procs.WatchEvent {
	t.Helper()
	var got []procs.WatchEvent
	for !slices.Contains(got, last) {
		evs, err := w.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for %v: %v after %d events (last ones %v)", last, err, len(got), got[max(0, len(got)-5):])
		}
		got = append(got, evs...)
	}
	return got
}

func ev(op, name string) procs.WatchEvent { return procs.WatchEvent{Op: op, Name: name} }

// TestWatchEventsInOrder: a create, a write, a rename and a remove in the
// watched directory come in the order they happened, named relative to
// it; a change in a subdirectory of a watch that is not recursive does
// not come.
func TestWatchEventsInOrder(t *testing.T) {
	_, a := startAgent(t)
	ctx := fileCtx(t)
	run(t, a, "mkdir -p /tmp/w/sub")
	w, err := a.Watch(ctx, "/tmp/w", false)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Close()
	run(t, a, "cd /tmp/w && : > sub/ignored && : > a && echo x >> a && mv a b && rm b && : > end")
	got := watchUntil(ctx, t, w, ev(procs.WatchCreate, "end"))
	want := []procs.WatchEvent{
		ev(procs.WatchCreate, "a"), ev(procs.WatchWrite, "a"), ev(procs.WatchRename, "a"),
		ev(procs.WatchCreate, "b"), ev(procs.WatchRemove, "b"), ev(procs.WatchCreate, "end"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n got %v\nwant %v", got, want)
	}
}

// TestWatchRecursive: a recursive watch sees changes in the directories
// under it, those made after it started included, named by their path
// under the watched one.
func TestWatchRecursive(t *testing.T) {
	_, a := startAgent(t)
	ctx := fileCtx(t)
	run(t, a, "mkdir -p /tmp/r/d1")
	w, err := a.Watch(ctx, "/tmp/r", true)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Close()
	run(t, a, "mkdir /tmp/r/d1/d2")
	watchUntil(ctx, t, w, ev(procs.WatchCreate, "d1/d2"))
	run(t, a, "echo x > /tmp/r/d1/d2/f && echo y >> /tmp/r/d1/g")
	got := watchUntil(ctx, t, w, ev(procs.WatchWrite, "d1/g"))
	want := []procs.WatchEvent{
		ev(procs.WatchCreate, "d1/d2/f"), ev(procs.WatchWrite, "d1/d2/f"),
		ev(procs.WatchCreate, "d1/g"), ev(procs.WatchWrite, "d1/g"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n got %v\nwant %v", got, want)
	}
}

// TestWatchTenThousand: 10,000 files made in a row come as 10,000 create
// events in order, none lost: under the kernel's queue (16,384 by
// default) and the host's (procs.MaxWatchQueue), whatever the reader's
// pace.
func TestWatchTenThousand(t *testing.T) {
	_, a := startAgent(t)
	ctx := fileCtx(t)
	run(t, a, "mkdir -p /tmp/many")
	w, err := a.Watch(ctx, "/tmp/many", false)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Close()
	run(t, a, "cd /tmp/many && i=0; while [ $i -lt 10000 ]; do : > f$i; i=$((i+1)); done; : > end")
	got := watchUntil(ctx, t, w, ev(procs.WatchCreate, "end"))
	if len(got) != 10001 {
		t.Fatalf("%d events, want 10,001", len(got))
	}
	for i, e := range got[:10000] {
		if e != ev(procs.WatchCreate, "f"+strconv.Itoa(i)) {
			t.Fatalf("event %d is %v, want create f%d", i, e, i)
		}
	}
}

// TestWatchOverflow: past its bound a watch drops events and says so
// with an overflow event where they were lost, without holding up the
// agent's reader; the watch goes on after it.
func TestWatchOverflow(t *testing.T) {
	_, a := startAgent(t)
	ctx := fileCtx(t)
	run(t, a, "mkdir -p /tmp/o")
	w, err := a.Watch(ctx, "/tmp/o", false)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Close()
	procs.SetWatchMax(w, 100)
	frame := func(from int) [][2]string {
		var f [][2]string
		for i := from; i < from+60; i++ {
			f = append(f, [2]string{procs.WatchCreate, fmt.Sprint("x", i)})
		}
		return f
	}
	procs.InjectWatchEvents(a, w, frame(0), frame(60), frame(120))
	got, err := w.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 101 || got[99] != ev(procs.WatchCreate, "x99") || got[100].Op != procs.WatchOverflow {
		t.Fatalf("got %d events ending %v, want x0..x99 then overflow", len(got), got[max(0, len(got)-2):])
	}
	// Events are passed on again once read.
	run(t, a, ": > /tmp/o/after")
	if got := watchUntil(ctx, t, w, ev(procs.WatchCreate, "after")); len(got) != 1 {
		t.Errorf("after the overflow: %v", got)
	}
}

// TestWatchRefused: a missing directory is ENOENT and a file ENOTDIR, as
// the sandbox's user sees them; a directory on the host that is not the
// sandbox's (a host /tmp path) is not found in it, so no host path can be
// watched; a directory the user may not read is refused (EACCES).
func TestWatchRefused(t *testing.T) {
	_, a := startAgent(t)
	ctx := fileCtx(t)
	host := t.TempDir() // on the host, not in the sandbox's /tmp
	run(t, a, ": > /tmp/file && mkdir -p /tmp/locked && chmod 0 /tmp/locked")
	for _, tc := range []struct {
		path string
		want error
	}{
		{"/tmp/missing", fs.ErrNotExist},
		{"/tmp/file", unix.ENOTDIR},
		{host, fs.ErrNotExist},
		{"/proc/1/root" + host, unix.EACCES}, // the sandbox's init is not its user's to look into
		{"/root", unix.EACCES},
	} {
		w, err := a.Watch(ctx, tc.path, true)
		if !errors.Is(err, tc.want) {
			t.Errorf("Watch(%s) = %v, want %v", tc.path, err, tc.want)
		}
		if w != nil {
			w.Close()
		}
	}
}

// TestWatchEnds: a closed watch ends (ErrWatchEnded) and the agent's
// inotify descriptor is gone; a watch whose directory is removed ends;
// one of an agent that goes ends with ErrClosed.
func TestWatchEnds(t *testing.T) {
	_, a := startAgent(t)
	ctx := fileCtx(t)
	run(t, a, "mkdir -p /tmp/e1 /tmp/e2")
	before := inotifyFds(t, a)
	w, err := a.Watch(ctx, "/tmp/e1", true)
	if err != nil {
		t.Fatal(err)
	}
	if n := inotifyFds(t, a); n != before+1 {
		t.Errorf("inotify fds with a watch: %d, want %d", n, before+1)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Next(ctx); !errors.Is(err, procs.ErrWatchEnded) {
		t.Errorf("Next after Close: %v", err)
	}
	if n := inotifyFds(t, a); n != before {
		t.Errorf("inotify fds after Close: %d, want %d", n, before)
	}
	w2, err := a.Watch(ctx, "/tmp/e2", false)
	if err != nil {
		t.Fatal(err)
	}
	run(t, a, "rmdir /tmp/e2")
	got := watchUntil(ctx, t, w2, ev(procs.WatchRemove, "."))
	if _, err := w2.Next(ctx); !errors.Is(err, procs.ErrWatchEnded) {
		t.Errorf("Next after the directory went: %v (events %v)", err, got)
	}
	if n := inotifyFds(t, a); n != before {
		t.Errorf("inotify fds after the directory went: %d, want %d", n, before)
	}
	w3, err := a.Watch(ctx, "/tmp", false)
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	if _, err := w3.Next(ctx); !errors.Is(err, procs.ErrClosed) {
		t.Errorf("Next after the agent went: %v", err)
	}
}

// inotifyFds counts the agent's inotify descriptors, as it lists its
// own /proc/self/fd.
func inotifyFds(t *testing.T, a *procs.Agent) int {
	t.Helper()
	ents, err := a.ListDir(fileCtx(t), "/proc/self/fd", 1)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if e.Link == "anon_inode:inotify" {
			n++
		}
	}
	return n
}

// TestWatchTooManyDirectories: a recursive watch of a tree of more than
// 10,000 directories is refused (E2BIG) rather than watching part of it;
// one whose tree grows past that says so with an overflow event naming
// the directory it cannot watch.
func TestWatchTooManyDirectories(t *testing.T) {
	_, a := startAgent(t)
	ctx := fileCtx(t)
	run(t, a, "mkdir -p /tmp/big && cd /tmp/big && seq -f d%g 0 9999 | xargs mkdir")
	if _, err := a.Watch(ctx, "/tmp/big", true); !errors.Is(err, unix.E2BIG) {
		t.Fatalf("a recursive watch of 10,001 directories: %v, want E2BIG", err)
	}
	run(t, a, "rmdir /tmp/big/d9999")
	w, err := a.Watch(ctx, "/tmp/big", true)
	if err != nil {
		t.Fatalf("a recursive watch of 10,000 directories: %v", err)
	}
	defer w.Close()
	run(t, a, "mkdir /tmp/big/more")
	got := watchUntil(ctx, t, w, ev(procs.WatchOverflow, "more"))
	if want := []procs.WatchEvent{ev(procs.WatchCreate, "more"), ev(procs.WatchOverflow, "more")}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}
