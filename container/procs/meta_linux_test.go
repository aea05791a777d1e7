package procs_test

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/tests/testenv"
)

// TestFileMeta: file metadata is user.e2b.* extended attributes, set and
// read by the agent in the sandbox as its user: SetMeta on an open file
// and on a path replaces the set (nil clears it) and answers what the
// file holds; Stat, ListDir and Meta read it (a symlink's is its
// target's); one set from inside the sandbox shows, less what is not
// UTF-8 or goes past MetaMax; a filesystem that keeps no user extended
// attributes (procfs) refuses metadata with EOPNOTSUPP and takes a clear.
func TestFileMeta(t *testing.T) {
	testenv.SkipWithoutTmpfsUserXattrs(t) // the sandbox's /tmp
	_, a := startAgent(t)
	ctx := fileCtx(t)
	want := map[string]string{"author": "mish", "purpose": "upload"}
	f, err := a.Create(ctx, "/tmp/m/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("content")); err != nil {
		t.Fatal(err)
	}
	got, err := f.SetMeta(want)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("SetMeta on the open file: %v, %v; want %v", got, err, want)
	}
	if e, err := a.Stat(ctx, "/tmp/m/a.txt"); err != nil || !maps.Equal(e.Meta, want) {
		t.Fatalf("Stat: %+v, %v; want metadata %v", e, err, want)
	}
	if o := collect(t, start(t, a, sh("ln -s a.txt /tmp/m/link && cd /tmp/m && touch plain && "+
		`python3 -c "import os; os.setxattr('plain', 'user.e2b.out', b'of band'); os.setxattr('plain', 'user.e2b.bin', b'\xff'); `+
		`os.setxattr('plain', 'user.e2b.big', b'x' * 5000); os.setxattr('plain', 'user.other', b'not ours')"`))); o.end == nil || o.end.ExitCode != 0 {
		t.Fatalf("set up in the sandbox: %+v %s", o.end, &o.stderr)
	}
	list, err := a.ListDir(ctx, "/tmp/m", 1)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]map[string]string{}
	for _, e := range list {
		byName[e.Name] = e.Meta
	}
	for name, w := range map[string]map[string]string{"a.txt": want, "link": want, "plain": {"out": "of band"}} {
		if !maps.Equal(byName[name], w) {
			t.Errorf("ListDir: %s's metadata %v, want %v", name, byName[name], w)
		}
	}

	if got, err := a.SetMeta(ctx, "/tmp/m/a.txt", map[string]string{"stage": "two"}); err != nil || !maps.Equal(got, map[string]string{"stage": "two"}) {
		t.Fatalf("SetMeta replacing: %v, %v", got, err)
	}
	if got, err := a.SetMeta(ctx, "/tmp/m/a.txt", nil); err != nil || got != nil {
		t.Fatalf("SetMeta clearing: %v, %v; want none", got, err)
	}
	if e, err := a.Stat(ctx, "/tmp/m/a.txt"); err != nil || e.Meta != nil {
		t.Fatalf("Stat after the clear: %v, %v; want none", e.Meta, err)
	}

	// More paths than one agent call takes, a missing one among them.
	paths := make([]string, 300)
	for i := range paths {
		paths[i] = fmt.Sprintf("/tmp/m/missing%d", i)
	}
	paths[7], paths[200] = "/tmp/m/plain", "/tmp/m/link"
	metas, err := a.Meta(ctx, paths)
	if err != nil || len(metas) != len(paths) {
		t.Fatalf("Meta of %d paths: %d, %v", len(paths), len(metas), err)
	}
	for i, m := range metas {
		var w map[string]string
		switch i {
		case 7:
			w = map[string]string{"out": "of band"}
		case 200:
			w = nil // a.txt was cleared
		}
		if !maps.Equal(m, w) {
			t.Errorf("Meta: %s: %v, want %v", paths[i], m, w)
		}
	}

	// A process of the sandbox's user (the agent's own /proc files are
	// root's: it is not dumpable).
	sleeper := start(t, a, procs.Config{Cmd: "/bin/sleep", Args: []string{"600"}})
	t.Cleanup(func() { _ = a.Signal(ctx, procs.Selector{Pid: sleeper.Pid}, unix.SIGKILL) })
	comm := fmt.Sprintf("/proc/%d/comm", sleeper.Pid)
	_, err = a.SetMeta(ctx, comm, map[string]string{"a": "b"})
	var fe *procs.FileError
	if !errors.As(err, &fe) || !errors.Is(err, unix.EOPNOTSUPP) || !strings.Contains(err.Error(), comm) {
		t.Fatalf("SetMeta on procfs: %v; want EOPNOTSUPP naming the path", err)
	}
	if _, err := a.SetMeta(ctx, comm, nil); err != nil {
		t.Fatalf("clearing on procfs: %v; want nothing to do", err)
	}
	if _, err := a.SetMeta(ctx, "/tmp/m", map[string]string{"a": "b"}); !errors.Is(err, unix.EISDIR) {
		t.Fatalf("SetMeta on a directory: %v; want EISDIR", err)
	}
}
