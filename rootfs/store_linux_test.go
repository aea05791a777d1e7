package rootfs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// errPopulate stands for any failure of a populate function.
var errPopulate = errors.New("populate failed")

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("requires root: store entries are chowned to root and locked like in production")
	}
}

// fakePopulate writes a tiny tree whose /marker holds content.
func fakePopulate(content string) PopulateFunc {
	return func(ctx context.Context, tree string) (Meta, error) {
		if err := os.MkdirAll(filepath.Join(tree, "etc"), 0o755); err != nil {
			return Meta{}, err
		}
		if err := os.WriteFile(filepath.Join(tree, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644); err != nil {
			return Meta{}, err
		}
		return Meta{Profile: "minimal"}, os.WriteFile(filepath.Join(tree, "marker"), []byte(content), 0o644)
	}
}

func mustCreate(t *testing.T, s Store, name, content string, force bool) *Rootfs {
	t.Helper()
	r, err := s.Create(context.Background(), name, force, nil, fakePopulate(content))
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return r
}

func marker(t *testing.T, r *Rootfs) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.Dir, "marker"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// leftovers lists the store's hidden (temporary or parked) entries.
func leftovers(t *testing.T, s Store) []string {
	t.Helper()
	ents, err := os.ReadDir(s.Root)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestCreatePreparesTree(t *testing.T) {
	requireRoot(t)
	s := Store{Root: t.TempDir()}
	r := mustCreate(t, s, "one", "hello", false)
	for _, mp := range MountPoints() {
		fi, err := os.Lstat(filepath.Join(r.Dir, mp))
		if err != nil || !fi.IsDir() {
			t.Fatalf("mount point %s: %v %v", mp, fi, err)
		}
		want := os.FileMode(0o755) | os.ModeDir
		if mp == "tmp" {
			want = 0o777 | os.ModeDir | os.ModeSticky
		}
		if fi.Mode() != want {
			t.Errorf("%s mode %v, want %v", mp, fi.Mode(), want)
		}
	}
	for file, want := range map[string]string{
		"etc/passwd":   "root:x:0:0:root:/root:/bin/sh\n" + sandboxPasswd + "\n",
		"etc/group":    sandboxGroup + "\n",
		"etc/hostname": "sandbox\n",
		"etc/hosts":    hostsFile,
	} {
		b, err := os.ReadFile(filepath.Join(r.Dir, file))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", file, b, err, want)
		}
	}
	if r.Meta.Name != "one" || r.Meta.Profile != "minimal" || !strings.HasPrefix(r.Meta.Digest, "sha256:") || r.Meta.SizeBytes == 0 {
		t.Errorf("meta = %+v", r.Meta)
	}
	got, err := s.Lookup("one")
	if err != nil || got.Meta.Digest != r.Meta.Digest || !got.Meta.Created.Equal(r.Meta.Created) {
		t.Fatalf("Lookup = %+v, %v; want round trip of %+v", got, err, r.Meta)
	}
	if loc, err := s.Locate("one"); err != nil || loc.Dir != r.Dir || loc.lockPath != got.lockPath {
		t.Fatalf("Locate = %+v, %v; want the tree %s and lock %s", loc, err, r.Dir, got.lockPath)
	}
	if l := leftovers(t, s); len(l) != 0 {
		t.Errorf("leftovers after a good build: %v", l)
	}
}

func TestCreateFailureLeavesNothing(t *testing.T) {
	requireRoot(t)
	tests := []struct {
		name     string
		populate func(cancel context.CancelFunc) PopulateFunc
		wantErr  error
	}{
		{"fails midway", func(context.CancelFunc) PopulateFunc {
			return func(ctx context.Context, tree string) (Meta, error) {
				os.WriteFile(filepath.Join(tree, "half"), []byte("x"), 0o644)
				return Meta{}, errPopulate
			}
		}, errPopulate},
		{"cancelled", func(cancel context.CancelFunc) PopulateFunc {
			return func(ctx context.Context, tree string) (Meta, error) {
				os.WriteFile(filepath.Join(tree, "half"), []byte("x"), 0o644)
				cancel()
				return Meta{}, nil // even when populate does not notice
			}
		}, context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := Store{Root: t.TempDir()}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, err := s.Create(ctx, "x", false, nil, tc.populate(cancel))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if l, _ := s.List(); len(l) != 0 {
				t.Errorf("List = %v after a failed build", l)
			}
			if l := leftovers(t, s); len(l) != 0 {
				t.Errorf("temp dirs left: %v", l)
			}
			if _, err := s.Lookup("x"); !errors.Is(err, ErrNotFound) {
				t.Errorf("Lookup err = %v, want ErrNotFound", err)
			}
			if _, err := s.Locate("x"); !errors.Is(err, ErrNotFound) {
				t.Errorf("Locate err = %v, want ErrNotFound", err)
			}
		})
	}
}

func TestForceSwapKeepsOldUntilNewIsComplete(t *testing.T) {
	requireRoot(t)
	s := Store{Root: t.TempDir()}
	old := mustCreate(t, s, "a", "old", false)
	if _, err := s.Create(context.Background(), "a", false, nil, fakePopulate("new")); !errors.Is(err, ErrExists) {
		t.Fatalf("without force: err = %v, want ErrExists", err)
	}
	r, err := s.Create(context.Background(), "a", true, nil, func(ctx context.Context, tree string) (Meta, error) {
		// Mid-build the old tree is what everyone sees.
		l, err := s.List()
		if err != nil || len(l) != 1 || l[0].Meta.Digest != old.Meta.Digest || marker(t, &l[0]) != "old" {
			t.Errorf("mid-build List = %+v, %v; want only the old tree", l, err)
		}
		return fakePopulate("new")(ctx, tree)
	})
	if err != nil {
		t.Fatal(err)
	}
	if marker(t, r) != "new" || r.Meta.Digest == old.Meta.Digest {
		t.Errorf("after force: marker %q digest %s (old %s)", marker(t, r), r.Meta.Digest, old.Meta.Digest)
	}
	if l := leftovers(t, s); len(l) != 0 {
		t.Errorf("old tree not deleted: %v", l)
	}

	// A failed forced rebuild keeps the current tree.
	_, err = s.Create(context.Background(), "a", true, nil, func(context.Context, string) (Meta, error) { return Meta{}, errPopulate })
	if !errors.Is(err, errPopulate) {
		t.Fatal(err)
	}
	if got, err := s.Lookup("a"); err != nil || marker(t, got) != "new" {
		t.Errorf("after failed force: %v %v", got, err)
	}
}

func TestForceSwapParksTreeInUse(t *testing.T) {
	requireRoot(t)
	s := Store{Root: t.TempDir()}
	old := mustCreate(t, s, "a", "old", false)
	release, err := old.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, "a", "new", true)
	l := leftovers(t, s)
	if len(l) != 1 || !strings.HasPrefix(l[0], ".old-a-") {
		t.Fatalf("leftovers = %v, want the parked old tree", l)
	}
	if b, err := os.ReadFile(filepath.Join(s.Root, l[0], "rootfs/marker")); err != nil || string(b) != "old" {
		t.Fatalf("parked tree: %q %v", b, err)
	}
	release()
	mustCreate(t, s, "b", "b", false) // the next build cleans it
	if l := leftovers(t, s); len(l) != 0 {
		t.Errorf("leftovers = %v after release and a new build", l)
	}
}

func TestListIgnoresIncompleteEntries(t *testing.T) {
	requireRoot(t)
	s := Store{Root: t.TempDir()}
	mustCreate(t, s, "b", "b", false)
	mustCreate(t, s, "a", "a", false)
	// A stale temp dir holding a full entry, a parked one and a half entry.
	for _, d := range []string{".tmp-c-123", ".old-d-456", "half"} {
		if err := os.MkdirAll(filepath.Join(s.Root, d, "rootfs"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(s.Root, ".tmp-c-123", metaFile), []byte(`{"name":"c"}`), 0o644)
	l, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range l {
		names = append(names, r.Name)
	}
	if strings.Join(names, ",") != "a,b" {
		t.Fatalf("List names = %v, want [a b]", names)
	}
	// The next build removes stale entries but not one a build still holds.
	busy := filepath.Join(s.Root, ".tmp-e-789")
	os.Mkdir(busy, 0o755)
	f, err := os.Open(busy)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := flock(f, 2 /* LOCK_EX */); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, "c", "c", false)
	if l := leftovers(t, s); len(l) != 1 || l[0] != ".tmp-e-789" {
		t.Errorf("leftovers = %v, want only the locked .tmp-e-789", l)
	}
}

func TestRemoveRefusesWhileAcquired(t *testing.T) {
	requireRoot(t)
	s := Store{Root: t.TempDir()}
	r := mustCreate(t, s, "a", "a", false)
	release, err := r.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	release2, err := r.Acquire() // shared: many sandboxes at once
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("a"); !errors.Is(err, ErrInUse) {
		t.Fatalf("Remove while acquired: %v, want ErrInUse", err)
	}
	release()
	if err := s.Remove("a"); !errors.Is(err, ErrInUse) {
		t.Fatalf("Remove while still acquired once: %v, want ErrInUse", err)
	}
	release2()
	release2() // idempotent
	if err := s.Remove("a"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Lookup("a")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "run: nsbox rootfs build --profile datasci --name a") {
		t.Fatalf("Lookup after Remove: %v", err)
	}
	if _, err := r.Acquire(); !errors.Is(err, ErrNotFound) {
		t.Errorf("Acquire after Remove: %v, want ErrNotFound", err)
	}
	if err := s.Remove("a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Remove: %v, want ErrNotFound", err)
	}
	if l := leftovers(t, s); len(l) != 0 {
		t.Errorf("leftovers = %v", l)
	}
}

func TestDigestStable(t *testing.T) {
	mk := func(content string) string {
		t.Helper()
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, "usr/bin"), 0o755)
		os.WriteFile(filepath.Join(dir, "usr/bin/tool"), []byte(content), 0o755)
		os.Symlink("tool", filepath.Join(dir, "usr/bin/link"))
		d, size, err := treeDigest(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		if size != int64(len(content)) {
			t.Errorf("size = %d, want %d", size, len(content))
		}
		return d
	}
	a, b, c := mk("abc"), mk("abc"), mk("abd")
	if a != b {
		t.Errorf("same trees, different digests: %s %s", a, b)
	}
	if a == c {
		t.Errorf("different content, same digest %s", a)
	}
}
