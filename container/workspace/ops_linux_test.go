package workspace

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container/internal/testenv"
)

// The sandbox user's host ids in these tests.
const testUID, testGID = 12345, 12346

func newTestWorkspace(t testing.TB, size int64) *Workspace {
	t.Helper()
	testenv.RequireRoot(t)
	w, err := New(size, testUID, testGID)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// plant makes what a sandbox could make in its workspace, as the tests
// need it: directories (ending in "/"), files, and symlinks ("name -> target").
func plant(t testing.TB, w *Workspace, items ...string) {
	t.Helper()
	for _, it := range items {
		var err error
		switch name, target, link := strings.Cut(it, " -> "); {
		case link:
			err = unix.Symlinkat(target, w.fd, name)
		case strings.HasSuffix(it, "/"):
			err = unix.Mkdirat(w.fd, strings.TrimSuffix(it, "/"), 0o755)
		default:
			var fd int
			fd, err = unix.Openat(w.fd, it, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
			if err == nil {
				_, err = unix.Write(fd, []byte("in:"+it))
				unix.Close(fd)
			}
		}
		if err != nil {
			t.Fatalf("plant %q: %v", it, err)
		}
	}
}

// hostCanary is a host directory a planted symlink points at; check fails
// the test when anything in it changed.
type hostCanary struct{ dir string }

func newHostCanary(t testing.TB) hostCanary {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "victim"), []byte("host data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "vdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vdir", "x"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	return hostCanary{dir}
}

func (c hostCanary) check(t testing.TB) {
	t.Helper()
	var got []string
	err := filepath.WalkDir(c.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		if st.Uid != 0 || st.Gid != 0 {
			t.Errorf("host %s now owned by %d:%d", p, st.Uid, st.Gid)
		}
		got = append(got, strings.TrimPrefix(p, c.dir))
		return nil
	})
	if err != nil {
		t.Fatalf("host canary: %v", err)
	}
	if want := []string{"", "/vdir", "/vdir/x", "/victim"}; !slices.Equal(got, want) {
		t.Fatalf("host canary dir changed: %q, want %q", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(c.dir, "victim")); err != nil || string(b) != "host data" {
		t.Fatalf("host victim: %q, %v", b, err)
	}
	for _, p := range []string{"victim", "vdir"} { // no metadata an archive could carry
		list := make([]byte, 64<<10)
		n, _ := unix.Llistxattr(filepath.Join(c.dir, p), list)
		for _, name := range strings.Split(string(list[:max(n, 0)]), "\x00") {
			if strings.HasPrefix(name, "user.") || strings.HasPrefix(name, "trusted.") {
				t.Fatalf("host %s now has the extended attribute %s", p, name)
			}
		}
	}
}

// escapeLinks are symlinks a sandbox may plant: to the host's root, to a
// host directory (absolute), and to ".." (relative), at the top and below.
func escapeLinks(c hostCanary) []string {
	return []string{
		"d/", "d/f", "e/",
		"root -> /", "up -> ..", "host -> " + c.dir, "dots -> ../../..",
		"d/root -> /", "d/up -> ..", "d/host -> " + c.dir, "d/upup -> ../..", "d/self -> .",
		"e/host -> " + c.dir,
	}
}

var linkNames = []string{"root", "up", "host", "dots", "d/root", "d/up", "d/host", "d/upup", "d/self", "e/host"}

// TestSymlinkEscapesRefused: a symlink to /, to a host directory or to ..,
// planted anywhere on the path, is refused by every operation and never
// followed; one at the end of the path is acted on itself.
func TestSymlinkEscapesRefused(t *testing.T) {
	c := newHostCanary(t)
	w := newTestWorkspace(t, 16<<20)
	plant(t, w, escapeLinks(c)...)
	escape := "nsbox-escape-" + time.Now().Format("150405.000000000")
	t.Cleanup(func() {
		for _, p := range []string{"/" + escape, filepath.Join(c.dir, escape)} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%s was created on the host", p)
				os.RemoveAll(p)
			}
		}
	})
	for _, l := range linkNames {
		t.Run(strings.ReplaceAll(l, "/", "_"), func(t *testing.T) {
			through := l + "/victim"
			refused := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, ErrInvalidPath) {
					t.Errorf("%s: %v, want ErrInvalidPath", what, err)
				}
			}
			_, err := w.Stat(through)
			refused("Stat through", err)
			_, _, err = w.ListDir(l, 1)
			refused("ListDir of the link", err)
			_, _, err = w.ListDir(l+"/vdir", 2)
			refused("ListDir through", err)
			_, err = w.MakeDir(l + "/" + escape)
			refused("MakeDir through", err)
			_, err = w.MakeDir(l + "/" + escape + "/a/b")
			refused("MakeDir through, deep", err)
			_, err = w.MakeDir(l)
			refused("MakeDir of the link", err)
			refused("WriteFile through", w.WriteFile(l+"/"+escape, []byte("x"), 0o644))
			refused("WriteFile over victim", w.WriteFile(through, []byte("x"), 0o644))
			refused("WriteFile of the link", w.WriteFile(l, []byte("x"), 0o644))
			_, err = w.WriteFrom(l+"/vdir/"+escape, strings.NewReader("x"), 0)
			refused("WriteFrom through", err)
			refused("Rename from through", w.Rename(through, "stolen"))
			refused("Rename into through", w.Rename("d/f", l+"/"+escape))
			refused("RemoveAll through", w.RemoveAll(through))
			refused("RemoveAll through, dir", w.RemoveAll(l+"/vdir"))
			refused("Remove through", w.Remove(through))
			_, err = w.Open(through)
			refused("Open through", err)
			_, err = w.Open(l)
			refused("Open of the link", err)
			_, err = w.ReadFile(through, 1<<20)
			refused("ReadFile through", err)

			// At the end of a path, the link itself is what is acted on.
			e, err := w.Stat(l)
			if err != nil || !e.Symlink || e.Dir || e.Target == "" || e.Path != l {
				t.Errorf("Stat(%s) = %+v, %v; want the symlink itself", l, e, err)
			}
			c.check(t)
		})
	}
	// Listing shows the links with their targets and never descends.
	entries, _, err := w.ListDir("", 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Count(e.Path, "/") > 1 {
			t.Errorf("ListDir descended to %s", e.Path)
		}
		if e.Path == "d/host" && (!e.Symlink || e.Target != c.dir) {
			t.Errorf("d/host listed as %+v", e)
		}
	}
	// Moving a link moves the link; removing one removes the link.
	if err := w.Rename("host", "moved"); err != nil {
		t.Fatal(err)
	}
	if e, err := w.Stat("moved"); err != nil || !e.Symlink || e.Target != c.dir {
		t.Fatalf("moved link: %+v, %v", e, err)
	}
	for _, l := range []string{"moved", "root", "up", "d/host"} {
		if err := w.RemoveAll(l); err != nil {
			t.Fatalf("RemoveAll(%s): %v", l, err)
		}
		if _, err := w.Stat(l); !errors.Is(err, ErrNotExist) {
			t.Fatalf("%s still there after RemoveAll: %v", l, err)
		}
	}
	// A directory full of links goes, links and all; what they point at stays.
	if err := w.RemoveAll("d"); err != nil {
		t.Fatal(err)
	}
	if err := w.RemoveAll("e"); err != nil {
		t.Fatal(err)
	}
	c.check(t)
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Fatalf("host /etc/passwd: %v", err)
	}
	entries, _, err = w.ListDir("", 1)
	if err != nil || len(entries) != 1 || entries[0].Path != "dots" {
		t.Fatalf("left: %+v, %v", entries, err)
	}
}

// FuzzOpsStayBeneath runs one operation with fuzzed paths on a workspace
// holding escape symlinks, and checks the host directory they point at is
// untouched and every file the operation made is beneath the workspace.
func FuzzOpsStayBeneath(f *testing.F) {
	for _, l := range linkNames {
		for op := range byte(8) {
			f.Add(op, l+"/victim", "x")
			f.Add(op, l+"/vdir", l+"/y")
			f.Add(op, "d/f", l+"/vdir/z")
			f.Add(op, l, "d/z")
		}
	}
	f.Add(byte(3), "d", "d/sub")
	f.Add(byte(4), "d", "")
	c := newHostCanary(f)
	f.Fuzz(func(t *testing.T, op byte, p1, p2 string) {
		w := newTestWorkspace(t, 1<<20)
		plant(t, w, escapeLinks(c)...)
		switch op % 8 {
		case 0:
			_, _ = w.Stat(p1)
		case 1:
			_, _, _ = w.ListDir(p1, 3)
		case 2:
			_, _ = w.MakeDir(p1)
		case 3:
			_ = w.Rename(p1, p2)
		case 4:
			_ = w.RemoveAll(p1)
		case 5:
			_ = w.WriteFile(p1, []byte(p2), 0o644)
		case 6:
			if f, err := w.Open(p1); err == nil {
				f.Close()
			}
		case 7:
			_ = w.Remove(p1)
		}
		c.check(t)
	})
}

func TestStatAndListDir(t *testing.T) {
	w := newTestWorkspace(t, 16<<20)
	plant(t, w, "a/", "a/b/", "a/b/c/", "a/b/c/deep", "a/x.txt", "a.txt", "z -> a/x.txt")
	root, err := w.Stat("")
	if err != nil || !root.Dir || root.Path != "" {
		t.Fatalf("Stat root: %+v, %v", root, err)
	}
	if e, err := w.Stat("a/x.txt"); err != nil || e.Dir || e.Size != int64(len("in:a/x.txt")) || e.Path != "a/x.txt" || e.Mode != 0o644 {
		t.Fatalf("Stat file: %+v, %v", e, err)
	}
	if _, err := w.Stat("nope/x"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("Stat missing: %v", err)
	}
	if _, err := w.Stat("a.txt/x"); !errors.Is(err, ErrInvalidPath) {
		t.Fatalf("Stat beneath a file: %v", err)
	}
	if _, err := w.Stat("../x"); !errors.Is(err, ErrInvalidPath) {
		t.Fatalf("Stat ../x: %v", err)
	}
	paths := func(es []Entry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Path)
		}
		return out
	}
	for _, tc := range []struct {
		dir   string
		depth int
		want  []string
	}{
		{"", 0, []string{"a", "a.txt", "z"}},
		{"", 1, []string{"a", "a.txt", "z"}},
		{"", 2, []string{"a", "a/b", "a/x.txt", "a.txt", "z"}},
		{"", 9, []string{"a", "a/b", "a/b/c", "a/b/c/deep", "a/x.txt", "a.txt", "z"}},
		{"a", 1, []string{"a/b", "a/x.txt"}},
		{"a/b", 2, []string{"a/b/c", "a/b/c/deep"}},
	} {
		es, cut, err := w.ListDir(tc.dir, tc.depth)
		if err != nil || cut || !slices.Equal(paths(es), tc.want) {
			t.Errorf("ListDir(%q, %d) = %q (cut %v), %v; want %q", tc.dir, tc.depth, paths(es), cut, err, tc.want)
		}
	}
	es, _, _ := w.ListDir("", 1)
	if z := es[2]; !z.Symlink || z.Target != "a/x.txt" {
		t.Errorf("z listed as %+v", z)
	}
	if _, _, err := w.ListDir("a.txt", 1); !errors.Is(err, ErrNotDir) {
		t.Errorf("ListDir of a file: %v, want ErrNotDir", err)
	}
	if _, _, err := w.ListDir("nope", 1); !errors.Is(err, ErrNotExist) {
		t.Errorf("ListDir of nothing: %v, want ErrNotExist", err)
	}
}

func owner(t *testing.T, w *Workspace, p string) (uint32, uint32) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstatat(w.fd, p, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatal(err)
	}
	return st.Uid, st.Gid
}

func TestMakeDir(t *testing.T) {
	w := newTestWorkspace(t, 16<<20)
	plant(t, w, "f")
	if created, err := w.MakeDir("a/b/c"); err != nil || !created {
		t.Fatalf("MakeDir(a/b/c) = %v, %v", created, err)
	}
	for _, p := range []string{"a", "a/b", "a/b/c"} {
		if uid, gid := owner(t, w, p); uid != testUID || gid != testGID {
			t.Errorf("%s owned by %d:%d", p, uid, gid)
		}
	}
	if created, err := w.MakeDir("a/b"); err != nil || created {
		t.Fatalf("MakeDir of an existing dir = %v, %v; want false, nil", created, err)
	}
	if _, err := w.MakeDir("f"); !errors.Is(err, ErrExist) {
		t.Fatalf("MakeDir over a file: %v, want ErrExist", err)
	}
	if _, err := w.MakeDir("f/x"); !errors.Is(err, ErrExist) {
		t.Fatalf("MakeDir beneath a file: %v, want ErrExist", err)
	}
	for _, p := range []string{"", ".", "a/../b", "/abs"} {
		if _, err := w.MakeDir(p); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("MakeDir(%q): %v, want ErrInvalidPath", p, err)
		}
	}
}

func TestRename(t *testing.T) {
	w := newTestWorkspace(t, 16<<20)
	plant(t, w, "f", "g", "d/", "d/in", "e/", "full/", "full/x")
	if err := w.Rename("f", "g"); err != nil {
		t.Fatalf("file over file: %v", err)
	}
	if b, err := w.ReadFile("g", 100); err != nil || string(b) != "in:f" {
		t.Fatalf("g = %q, %v", b, err)
	}
	if err := w.Rename("d", "e"); err != nil {
		t.Fatalf("dir over empty dir: %v", err)
	}
	if _, err := w.Stat("e/in"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from, to string
		want     error
	}{
		{"e", "full", ErrExist},
		{"g", "full", ErrExist},
		{"e", "g", ErrExist},
		{"e", "e/sub", ErrInvalidPath},
		{"nope", "x", ErrNotExist},
		{"g", "nodir/x", ErrNotExist},
		{"g", "", ErrInvalidPath},
		{"", "g", ErrInvalidPath},
	} {
		if err := w.Rename(tc.from, tc.to); !errors.Is(err, tc.want) {
			t.Errorf("Rename(%q, %q) = %v, want %v", tc.from, tc.to, err, tc.want)
		}
	}
}

func TestRemoveAll(t *testing.T) {
	w := newTestWorkspace(t, 16<<20)
	plant(t, w, "d/", "d/a/", "d/a/b/", "d/a/b/f", "d/g", "d/l -> /etc", "keep")
	for i := range 3000 { // more than one Readdirnames batch
		plant(t, w, fmt.Sprintf("d/a/n%04d", i))
	}
	if err := w.RemoveAll("d"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Stat("d"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("d after RemoveAll: %v", err)
	}
	if err := w.RemoveAll("d"); err != nil {
		t.Fatalf("RemoveAll of nothing: %v", err)
	}
	if err := w.RemoveAll("nodir/x"); err != nil {
		t.Fatalf("RemoveAll beneath nothing: %v", err)
	}
	if err := w.RemoveAll("keep"); err != nil {
		t.Fatal(err)
	}
	if err := w.RemoveAll(""); !errors.Is(err, ErrInvalidPath) {
		t.Fatalf("RemoveAll of the root: %v", err)
	}
}

// TestWriteFromStreams: 10 MiB go in through a reader (never held as one
// slice), owned by the sandbox user; past the workspace's size, ErrFull; a
// FIFO the sandbox left in the way is refused, not waited on.
func TestWriteFromStreams(t *testing.T) {
	w := newTestWorkspace(t, 16<<20)
	h := sha256.New()
	n, err := w.WriteFrom("up/load.bin", io.TeeReader(io.LimitReader(rand.Reader, 10<<20), h), 0o600)
	if err != nil || n != 10<<20 {
		t.Fatalf("WriteFrom = %d, %v", n, err)
	}
	f, err := w.Open("up/load.bin")
	if err != nil {
		t.Fatal(err)
	}
	h2 := sha256.New()
	if _, err := io.Copy(h2, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if !bytes.Equal(h.Sum(nil), h2.Sum(nil)) {
		t.Fatal("content differs")
	}
	if e, _ := w.Stat("up/load.bin"); e.Mode != 0o600 || e.Size != 10<<20 {
		t.Fatalf("entry %+v", e)
	}
	if uid, gid := owner(t, w, "up/load.bin"); uid != testUID || gid != testGID {
		t.Fatalf("owned by %d:%d", uid, gid)
	}
	if _, err := w.WriteFrom("big", io.LimitReader(rand.Reader, 8<<20), 0); !errors.Is(err, ErrFull) {
		t.Fatalf("past the size: %v, want ErrFull", err)
	}
	if err := unix.Mkfifoat(w.fd, "fifo", 0o666); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := w.WriteFrom("fifo", strings.NewReader("x"), 0); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Fatalf("WriteFrom to a FIFO: %v, want ErrNotRegular", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WriteFrom to a FIFO blocked")
	}
	if _, err := w.Open("fifo"); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("Open of a FIFO: %v", err)
	}
}

// TestClosedWorkspace: after Close (the sandbox's teardown), every
// operation fails with ErrClosed; a Close during operations waits for
// them instead of closing the fd under them.
func TestClosedWorkspace(t *testing.T) {
	w := newTestWorkspace(t, 16<<20)
	stop := make(chan struct{})
	done := make(chan struct{})
	running := make(chan struct{}) // closed once a round of operations is done
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			if i == 1 {
				close(running)
			}
			select {
			case <-stop:
				return
			default:
			}
			p := fmt.Sprintf("d%d/f", i%10)
			if err := w.WriteFile(p, []byte("x"), 0); err != nil && !errors.Is(err, ErrClosed) {
				t.Errorf("WriteFile during Close: %v", err)
			}
			if _, _, err := w.ListDir("", 2); err != nil && !errors.Is(err, ErrClosed) {
				t.Errorf("ListDir during Close: %v", err)
			}
			if err := w.RemoveAll(p); err != nil && !errors.Is(err, ErrClosed) {
				t.Errorf("RemoveAll during Close: %v", err)
			}
		}
	}()
	<-running
	w.Close() // the operations go on around it
	close(stop)
	<-done
	for name, err := range map[string]error{
		"Stat":      func() error { _, err := w.Stat("x"); return err }(),
		"ListDir":   func() error { _, _, err := w.ListDir("", 1); return err }(),
		"MakeDir":   func() error { _, err := w.MakeDir("x"); return err }(),
		"Rename":    w.Rename("a", "b"),
		"RemoveAll": w.RemoveAll("x"),
		"WriteFile": w.WriteFile("x", nil, 0),
		"ReadFile":  func() error { _, err := w.ReadFile("x", 1); return err }(),
		"List":      func() error { _, _, err := w.List(""); return err }(),
		"Open":      func() error { _, err := w.Open("x"); return err }(),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

// cutReader yields n bytes, then fails as a client that left mid-upload.
type cutReader struct{ n int }

func (c *cutReader) Read(p []byte) (int, error) {
	if c.n == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	k := min(len(p), c.n)
	c.n -= k
	return k, nil
}

// TestWriteFromCutOffLeavesNothing: an upload whose reader fails mid-way,
// or that fills the workspace, leaves no partial file, new or replacing
// one; the reader's error is returned as it is (errors.Is).
func TestWriteFromCutOffLeavesNothing(t *testing.T) {
	w := newTestWorkspace(t, 4<<20)
	if err := w.WriteFile("old.txt", []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"new.txt", "old.txt", "d/deep.txt"} {
		if _, err := w.WriteFrom(p, &cutReader{n: 100 << 10}, 0); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%s: WriteFrom = %v, want the reader's error", p, err)
		}
		if e, err := w.Stat(p); !errors.Is(err, ErrNotExist) {
			t.Errorf("%s after a cut-off upload: %+v, %v; want it gone", p, e, err)
		}
	}
	if _, err := w.WriteFrom("full.bin", io.LimitReader(rand.Reader, 8<<20), 0); !errors.Is(err, ErrFull) {
		t.Fatalf("past the size: %v, want ErrFull", err)
	}
	if _, err := w.Stat("full.bin"); !errors.Is(err, ErrNotExist) {
		t.Errorf("a file that filled the workspace was left: %v", err)
	}
}
