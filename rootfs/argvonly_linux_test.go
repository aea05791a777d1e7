package rootfs

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// withPython wraps populate with an executable usr/bin/python3.version and
// its python3 link, as Debian has them.
func withPython(populate PopulateFunc, version string) PopulateFunc {
	return func(ctx context.Context, tree string) (Meta, error) {
		m, err := populate(ctx, tree)
		if err != nil {
			return m, err
		}
		if err := os.MkdirAll(filepath.Join(tree, "usr/bin"), 0o755); err != nil {
			return m, err
		}
		if err := os.WriteFile(filepath.Join(tree, "usr/bin/python"+version), nil, 0o755); err != nil {
			return m, err
		}
		return m, os.Symlink("python"+version, filepath.Join(tree, "usr/bin/python3"))
	}
}

// TestArgvOnly: ArgvOnly says what meta.json says of a store's tree, and
// the new tree's answer once one replaces it (the old answer was kept); a
// tree outside a store is not argv-only.
func TestArgvOnly(t *testing.T) {
	requireRoot(t)
	s := Store{Root: t.TempDir()}
	create := func(name string, populate PopulateFunc) *Rootfs {
		t.Helper()
		r, err := s.Create(context.Background(), name, true, nil, populate)
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		// Written an hour ago: ArgvOnly keeps its answer.
		past := r.Meta.Created.Add(-time.Hour)
		if err := os.Chtimes(filepath.Join(filepath.Dir(r.Dir), metaFile), past, past); err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct {
		name     string
		populate PopulateFunc
		want     bool
	}{
		{"nopython", fakePopulate("a"), true},
		{"py38", withPython(fakePopulate("b"), "3.8"), true},
		{"py311", withPython(fakePopulate("c"), "3.11"), false},
	} {
		r := create(tc.name, tc.populate)
		if r.Meta.ArgvOnly != tc.want {
			t.Fatalf("%s: meta says argv_only %v, want %v", tc.name, r.Meta.ArgvOnly, tc.want)
		}
		for i := range 2 { // read, then kept
			if got := ArgvOnly(r.Dir); got != tc.want {
				t.Errorf("%s: ArgvOnly (call %d) = %v, want %v", tc.name, i+1, got, tc.want)
			}
		}
	}
	// Replaced: the same name, the other answer.
	if r := create("py311", fakePopulate("d")); !ArgvOnly(r.Dir) {
		t.Error("py311 replaced by a tree without python3: ArgvOnly = false")
	}
	if r := create("nopython", withPython(fakePopulate("e"), "3.12")); ArgvOnly(r.Dir) {
		t.Error("nopython replaced by a tree with python 3.12: ArgvOnly = true")
	}
	// Not a store's tree: a directory with no meta.json beside it, one
	// not called rootfs, none.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "meta.json"), []byte(`{"argv_only": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), "rootfs"), filepath.Join(other, "tree"), ""} {
		if ArgvOnly(dir) {
			t.Errorf("ArgvOnly(%q) = true for a tree outside a store", dir)
		}
	}
}
