package main

import (
	"os"
	"strings"
	"testing"
)

// TestRootfsBuildNeedsProfile: `nsbox rootfs build` without --profile
// starts nothing (it used to start the data-science build, hundreds of MiB
// and minutes, unasked): exit 2, one line naming both profiles with their
// size and time, the store untouched. The mirror is a closed port, so that
// a build started anyway fails at once instead of downloading.
func TestRootfsBuildNeedsProfile(t *testing.T) {
	store := t.TempDir()
	for _, args := range [][]string{
		{"rootfs", "build", "--store", store, "--mirror", "http://127.0.0.1:9/debian"},
		{"rootfs", "build", "--store", store, "--mirror", "http://127.0.0.1:9/debian", "--name", "x"},
	} {
		_, stderr, code := runApp(t, "", args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", args, code, stderr)
		}
		for _, want := range []string{"--profile is required", "--profile datasci (", "3 to 7 minutes", "--profile minimal (", "nsbox rootfs build --help"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, want, stderr)
			}
		}
		if n := strings.Count(stderr, "\n"); n != 1 {
			t.Errorf("%v: %d lines, want one:\n%s", args, n, stderr)
		}
	}
	if ents, err := os.ReadDir(store); err != nil || len(ents) != 0 {
		t.Errorf("the store was touched: %v %v", ents, err)
	}
}

// TestRootfsImportNeedsNoProfile: import takes a tarball or a directory,
// not a profile; its error is about the path it was given (062f852 had
// pasted build's --profile check into it, which made every import fail).
func TestRootfsImportNeedsNoProfile(t *testing.T) {
	store := t.TempDir()
	missing := store + "/no-such.tar"
	_, stderr, code := runApp(t, "", "rootfs", "import", "--store", store, "x", missing)
	if code == 0 || strings.Contains(stderr, "--profile") || !strings.Contains(stderr, "no-such.tar") {
		t.Errorf("import of a missing tarball: exit %d, stderr %q; want an error naming the path, none about --profile", code, stderr)
	}
}
