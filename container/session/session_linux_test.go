package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/clock/clocktest"
	"github.com/nsbox/nsbox/container/internal/testenv"
	"github.com/nsbox/nsbox/container/runner"
	"github.com/nsbox/nsbox/container/workspace"
)

func TestStatePersists(t *testing.T) {
	m, _ := newManager(t, Config{})
	s := create(t, m, Options{})
	run(t, s, "x = 41")
	if res := run(t, s, "x + 1"); res.Value != "42" || res.Status != runner.StatusOK {
		t.Fatalf("x + 1 = %q (%s)", res.Value, res.Status)
	}
	if info := s.Info(); info.ExecCount != 2 || info.State != StateIdle {
		t.Fatalf("info %+v", info)
	}
}

func TestTimeoutKeepsSession(t *testing.T) {
	m, _ := newManager(t, Config{})
	// 2 s: an interrupt that came before the cell started (a busy machine
	// slow to hand it over) would be ignored and the session killed.
	s := create(t, m, Options{Limits: container.Limits{Timeout: 2 * time.Second}})
	run(t, s, "x = 1")
	res, err := s.Exec(context.Background(), runner.ExecRequest{Code: "while True: pass"})
	if err != nil || res.Status != runner.StatusTimeout || res.Killed {
		t.Fatalf("res %+v err %v", res, err)
	}
	if res := run(t, s, "x"); res.Value != "1" {
		t.Fatalf("x = %q after the timeout", res.Value)
	}
}

func TestFilesAndCSV(t *testing.T) {
	m, _ := newManager(t, Config{})
	s := create(t, m, Options{Files: []container.File{{Path: "in/seed.txt", Data: []byte("seed")}}})
	ctx := context.Background()
	csv := "city,temp\nParis,21\nOslo,9\nRome,27\n"
	if err := s.WriteFile(ctx, "data.csv", []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, s, `import csv, os
rows = list(csv.DictReader(open('data.csv')))
mean = sum(int(r['temp']) for r in rows) / len(rows)
os.makedirs('out', exist_ok=True)
with open('out/summary.txt', 'w') as f:
    f.write(f'{len(rows)} rows, mean {mean:.1f}\n')
mean`)
	if res.Status != runner.StatusOK || res.Value != "19.0" {
		t.Fatalf("%+v %+v", res.Result, res.Exception)
	}
	if len(res.Files) != 1 || res.Files[0].Path != "out/summary.txt" || len(res.Files[0].SHA256) != 64 {
		t.Fatalf("changed files %+v", res.Files)
	}
	got, err := s.ReadFile(ctx, "out/summary.txt", 1<<20)
	if err != nil || string(got) != "3 rows, mean 19.0\n" {
		t.Fatalf("summary %q %v", got, err)
	}
	entries, files, cut, err := s.List(ctx, "")
	if err != nil || cut || len(entries) != 5 || len(files) != 3 {
		t.Fatalf("list %+v %+v truncated %v, %v", entries, files, cut, err)
	}
	if err := s.Remove(ctx, "data.csv"); err != nil {
		t.Fatal(err)
	}
	if res := run(t, s, "import os\nos.path.exists('data.csv')"); res.Value != "False" {
		t.Fatalf("data.csv still there: %q", res.Value)
	}
}

func TestSymlinkNotFollowed(t *testing.T) {
	m, _ := newManager(t, Config{})
	s := create(t, m, Options{})
	run(t, s, "import os\nos.symlink('/etc/passwd', 'passwd')\nos.symlink('/etc', 'etc')")
	ctx := context.Background()
	for _, p := range []string{"passwd", "etc/passwd"} {
		if data, err := s.ReadFile(ctx, p, 1<<20); err == nil || !errors.Is(err, container.ErrInvalidPath) {
			t.Errorf("ReadFile(%s) = %q, %v; want ErrInvalidPath", p, data, err)
		}
	}
	if err := s.WriteFile(ctx, "etc/x", []byte("x"), 0o644); err == nil {
		t.Error("WriteFile through a symlinked dir succeeded")
	}
}

func TestSessionsIsolated(t *testing.T) {
	m, _ := newManager(t, Config{})
	a, b := create(t, m, Options{}), create(t, m, Options{})
	run(t, a, "secret = 'a'\nopen('a.txt', 'w').write('a')")
	res := run(t, b, "import os\n('secret' in globals(), os.listdir('.'))")
	if res.Value != "(False, [])" {
		t.Fatalf("b sees %s", res.Value)
	}
	if _, err := b.ReadFile(context.Background(), "a.txt", 10); !errors.Is(err, container.ErrNotExist) {
		t.Fatalf("b reads a's file: %v", err)
	}
}

func TestOOMKillsSession(t *testing.T) {
	m, _ := newManager(t, Config{})
	s := create(t, m, Options{Limits: container.Limits{MemoryBytes: 64 << 20}})
	res := run(t, s, "b = bytearray(1 << 30)")
	if res.Status != runner.StatusOOM {
		t.Fatalf("status %q", res.Status)
	}
	info := s.Info()
	if info.State != StateDead || info.DeadStatus != runner.StatusOOM || !strings.Contains(info.DeadReason, "memory") {
		t.Fatalf("info %+v", info)
	}
	if _, err := s.Exec(context.Background(), runner.ExecRequest{Code: "1"}); !errors.Is(err, ErrDead) {
		t.Fatalf("exec on a dead session: %v", err)
	}
	if got, err := m.Get(s.ID()); err != nil || got.Info().State != StateDead {
		t.Fatalf("Get after OOM: %v", err)
	}
	if m.Live() != 0 {
		t.Fatalf("live %d", m.Live())
	}
}

func TestIdleExpiryLeavesNothing(t *testing.T) {
	clk := clocktest.New(time.Now())
	m, name := newManager(t, Config{Clock: clk})
	s := create(t, m, Options{IdleTimeout: 200 * time.Millisecond})
	pid := s.r.Sandbox().Pid()
	if len(cgroupDirs(t, name)) == 0 {
		t.Fatal("no sandbox cgroup found while the session lives (test cannot check cleanup)")
	}
	clk.Advance(199 * time.Millisecond)
	if _, err := m.Get(s.ID()); err != nil {
		t.Fatalf("Get 1 ms before the idle timeout: %v", err)
	}
	clk.Advance(time.Millisecond) // the idle timer ends it before Advance returns
	if _, err := m.Get(s.ID()); !errors.Is(err, ErrNotFound) || m.Live() != 0 {
		t.Fatalf("at the idle timeout: Get %v, %d live; want it gone", err, m.Live())
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("session process %d still exists: %v", pid, err)
	}
	if d := cgroupDirs(t, name); len(d) > 0 {
		t.Errorf("cgroups left: %v", d)
	}
}

func TestMaxSessionsAndClose(t *testing.T) {
	m, name := newManager(t, Config{MaxSessions: 2})
	create(t, m, Options{})
	b := create(t, m, Options{})
	released := false
	_, err := m.Create(context.Background(), Options{RootfsDir: testenv.Rootfs(t), Release: func() { released = true }})
	if !errors.Is(err, ErrTooMany) || !released {
		t.Fatalf("third session: %v (released %v)", err, released)
	}
	if err := m.Delete(b.ID()); err != nil {
		t.Fatal(err)
	}
	create(t, m, Options{})
	if n := len(m.List()); n != 2 {
		t.Fatalf("list has %d", n)
	}
	m.Close()
	if m.Live() != 0 || len(m.List()) != 0 {
		t.Fatalf("after Close: live %d list %d", m.Live(), len(m.List()))
	}
	if d := cgroupDirs(t, name); len(d) > 0 {
		t.Errorf("cgroups left: %v", d)
	}
	if _, err := m.Create(context.Background(), Options{RootfsDir: testenv.Rootfs(t)}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Create after Close: %v", err)
	}
}

// A session's listings stop at workspace.MaxListed entries and say so: an
// exec's changed files and the file list.
func TestListingsSayWhenCut(t *testing.T) {
	m, _ := newManager(t, Config{})
	s := create(t, m, Options{})
	// 10,001 files: the largest timeout, so that only a hang ends the cell.
	res, err := s.Exec(context.Background(), runner.ExecRequest{Code: fmt.Sprintf("for i in range(%d): open('f%%05d' %% i, 'w').close()", workspace.MaxListed+1), Timeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != runner.StatusOK || !res.FilesTruncated || len(res.Files) != workspace.MaxListed {
		t.Errorf("exec: %s, %d files, truncated %v", res.Status, len(res.Files), res.FilesTruncated)
	}
	entries, files, cut, err := s.List(context.Background(), "")
	if err != nil || !cut || len(entries) != workspace.MaxListed || len(files) != workspace.MaxListed {
		t.Errorf("list: %d entries, %d files, truncated %v, %v", len(entries), len(files), cut, err)
	}
	if err := s.Remove(context.Background(), "f00000"); err != nil {
		t.Fatal(err)
	}
	if _, _, cut, err := s.List(context.Background(), ""); err != nil || cut {
		t.Errorf("list of %d: truncated %v, %v", workspace.MaxListed, cut, err)
	}
}
