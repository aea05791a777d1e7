package session

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/runner"
)

// TestFileOpsDoNotWaitForACell: while a cell runs, the host writes the
// file the cell waits for and reads the one it wrote. With file operations
// behind the exec's semaphore this deadlocked until the context's end.
func TestFileOpsDoNotWaitForACell(t *testing.T) {
	m, _ := newManager(t, Config{})
	s := create(t, m, Options{})
	type result struct {
		res *ExecResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := s.Exec(context.Background(), runner.ExecRequest{Timeout: time.Minute, Code: `import os, time
open('started', 'w').write('cell')
while not os.path.exists('in/go'):
    time.sleep(0.01)
open('in/go').read()`})
		done <- result{res, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		if _, err := s.Stat(ctx, "started"); err == nil {
			break
		} else if !errors.Is(err, container.ErrNotExist) {
			t.Fatalf("Stat during the cell: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := s.Info().State; st != StateBusy {
		t.Fatalf("state %s while the cell runs", st)
	}
	if got, err := s.ReadFile(ctx, "started", 100); err != nil || string(got) != "cell" {
		t.Fatalf("ReadFile during the cell: %q, %v", got, err)
	}
	if _, err := s.MakeDir(ctx, "in"); err != nil {
		t.Fatalf("MakeDir during the cell: %v", err)
	}
	if es, _, err := s.ListDir(ctx, "", 1); err != nil || len(es) != 2 {
		t.Fatalf("ListDir during the cell: %+v, %v", es, err)
	}
	if err := s.WriteFile(ctx, "in/go.tmp", []byte("host"), 0o644); err != nil {
		t.Fatalf("WriteFile during the cell: %v", err)
	}
	if err := s.Rename(ctx, "in/go.tmp", "in/go"); err != nil {
		t.Fatalf("Rename during the cell: %v", err)
	}
	r := <-done
	if r.err != nil || r.res.Status != runner.StatusOK || r.res.Value != "'host'" {
		t.Fatalf("the cell: %+v, %v", r.res, r.err)
	}
}

// TestFileOps drives the E2B-shaped operations on a live session, with
// symlinks the sandbox planted refused on the way.
func TestFileOps(t *testing.T) {
	m, _ := newManager(t, Config{})
	s := create(t, m, Options{})
	ctx := context.Background()
	if created, err := s.MakeDir(ctx, "a/b"); err != nil || !created {
		t.Fatalf("MakeDir = %v, %v", created, err)
	}
	if created, err := s.MakeDir(ctx, "a/b"); err != nil || created {
		t.Fatalf("MakeDir again = %v, %v", created, err)
	}
	if n, err := s.WriteFrom(ctx, "a/b/big", io.LimitReader(zeros{}, 10<<20), 0); err != nil || n != 10<<20 {
		t.Fatalf("WriteFrom 10 MiB = %d, %v", n, err)
	}
	if _, err := s.MakeDir(ctx, "a/b/big"); !errors.Is(err, container.ErrExist) {
		t.Fatalf("MakeDir over a file: %v", err)
	}
	res := run(t, s, `import os
os.symlink('/', 'root')
os.symlink('..', 'a/up')
(os.path.getsize('a/b/big'), os.stat('a/b').st_uid)`)
	if res.Value != "(10485760, 1000)" {
		t.Fatalf("the sandbox sees %s", res.Value)
	}
	e, err := s.Stat(ctx, "root")
	if err != nil || !e.Symlink || e.Target != "/" {
		t.Fatalf("Stat(root) = %+v, %v", e, err)
	}
	for _, p := range []string{"root/etc", "a/up/a", "root/tmp/x"} {
		if _, err := s.Stat(ctx, p); !errors.Is(err, container.ErrInvalidPath) {
			t.Errorf("Stat(%s): %v", p, err)
		}
		if _, _, err := s.ListDir(ctx, p, 1); !errors.Is(err, container.ErrInvalidPath) {
			t.Errorf("ListDir(%s): %v", p, err)
		}
		if _, err := s.MakeDir(ctx, p+"/x"); !errors.Is(err, container.ErrInvalidPath) {
			t.Errorf("MakeDir(%s/x): %v", p, err)
		}
		if err := s.RemoveAll(ctx, p); !errors.Is(err, container.ErrInvalidPath) {
			t.Errorf("RemoveAll(%s): %v", p, err)
		}
		if err := s.Rename(ctx, "a/b/big", p); !errors.Is(err, container.ErrInvalidPath) {
			t.Errorf("Rename to %s: %v", p, err)
		}
		if _, err := s.WriteFrom(ctx, p+"/x", strings.NewReader("x"), 0); !errors.Is(err, container.ErrInvalidPath) {
			t.Errorf("WriteFrom(%s/x): %v", p, err)
		}
	}
	es, _, err := s.ListDir(ctx, "", 3)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Path)
	}
	if strings.Join(got, " ") != "a a/b a/b/big a/up root" {
		t.Fatalf("ListDir = %q", got)
	}
	if err := s.Rename(ctx, "a/b", "moved"); err != nil {
		t.Fatal(err)
	}
	f, err := s.Open(ctx, "moved/big")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, f)
	f.Close()
	if n != 10<<20 {
		t.Fatalf("read back %d bytes", n)
	}
	if err := s.RemoveAll(ctx, "a"); err != nil { // holds the up link
		t.Fatal(err)
	}
	if err := s.RemoveAll(ctx, "root"); err != nil {
		t.Fatal(err)
	}
	if res := run(t, s, "import os\nsorted(os.listdir('.'))"); res.Value != "['moved']" {
		t.Fatalf("left %s", res.Value)
	}
	if err := m.Delete(s.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, "moved"); !errors.Is(err, ErrDead) {
		t.Fatalf("Stat on a deleted session: %v, want ErrDead", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestFileOpsOnAPausedSession: a paused session's files are read and
// written from the host; it stays paused.
func TestFileOpsOnAPausedSession(t *testing.T) {
	m, _ := newManager(t, Config{})
	s := create(t, m, Options{})
	run(t, s, "open('x', 'w').write('before')")
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got, err := s.ReadFile(ctx, "x", 100); err != nil || string(got) != "before" {
		t.Fatalf("ReadFile: %q, %v", got, err)
	}
	if err := s.WriteFile(ctx, "y", []byte("paused"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ListDir(ctx, "", 1); err != nil {
		t.Fatal(err)
	}
	if st := s.Info().State; st != StatePaused {
		t.Fatalf("state %s after file operations, want paused", st)
	}
	if res := run(t, s, "open('y').read()"); res.Value != "'paused'" {
		t.Fatalf("y = %s", res.Value)
	}
}
