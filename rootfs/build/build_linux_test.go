package build

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/rootfs"
)

// requireRealBuild skips a test that runs mmdebstrap unless asked for.
func requireRealBuild(t *testing.T) {
	t.Helper()
	if os.Getenv("NSBOX_TEST_BUILD") != "1" {
		t.Skip("slow real build: set NSBOX_TEST_BUILD=1 (needs root, mmdebstrap and a Debian mirror)")
	}
	if os.Geteuid() != 0 {
		t.Skip("requires root: mmdebstrap --mode=root and chroot")
	}
}

// TestBuildMinimal runs a real mmdebstrap build (network, ~40 s).
func TestBuildMinimal(t *testing.T) {
	requireRealBuild(t)
	s := rootfs.Store{Root: t.TempDir()}
	var phases []string
	r, err := Run(context.Background(), s, Options{Name: "t", Profile: "minimal"}, func(p rootfs.Progress) {
		if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
			phases = append(phases, p.Phase)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("phases %v, size %s, %d packages, python %s", phases, rootfs.HumanSize(r.Meta.SizeBytes), len(r.Meta.Packages), r.Meta.Python)
	out, err := exec.Command("chroot", r.Dir, "/usr/bin/python3", "-I", "-B", "-c", "print(6*7)").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "42" {
		t.Fatalf("python3 in the tree: %q, %v", out, err)
	}
	found := false
	for _, p := range r.Meta.Packages {
		found = found || p.Name == "python3"
	}
	if !found || !strings.HasPrefix(r.Meta.Python, "3.") {
		t.Errorf("meta lacks python3: python %q, %d packages", r.Meta.Python, len(r.Meta.Packages))
	}
	if _, err := os.Stat(filepath.Join(r.Dir, "usr/share/man/man1")); err == nil {
		t.Error("man pages not trimmed")
	}
	checkTrimmed(t, r, "perl")
}

// TestBuildDatasci runs a real datasci build (network, ~3 min): the import
// and computation check and the node check must pass without the toolchain.
func TestBuildDatasci(t *testing.T) {
	requireRealBuild(t)
	s := rootfs.Store{Root: t.TempDir()}
	r, err := Run(context.Background(), s, Options{Name: "t", Profile: "datasci"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("size %s (%s before trimming), %d packages, %d purged", rootfs.HumanSize(r.Meta.SizeBytes),
		rootfs.HumanSize(r.Meta.Trim.BytesBefore), len(r.Meta.Packages), len(r.Meta.Trim.Purged))
	checkTrimmed(t, r, "g++-12", "libboost1.74-dev", "python3-pythran")
	if r.Meta.Trim.FontCache == "" {
		t.Fatal("no font cache recorded")
	}
	if m, _ := filepath.Glob(filepath.Join(r.Dir, r.Meta.Trim.FontCache, "fontlist-*.json")); len(m) != 1 {
		t.Errorf("font cache files: %v", m)
	}
	if r.Meta.Version("nodejs") == "" || r.Meta.Version("esbuild") == "" {
		t.Errorf("no nodejs or esbuild in the package list: node %q, esbuild %q", r.Meta.Version("nodejs"), r.Meta.Version("esbuild"))
	}
	for _, p := range []string{"usr/bin/g++", "usr/lib/gcc", "usr/include/boost", "usr/lib/x86_64-linux-gnu/nodejs/esbuild-wasm/esbuild.wasm"} {
		if _, err := os.Lstat(filepath.Join(r.Dir, p)); err == nil {
			t.Errorf("/%s still in the tree", p)
		}
	}
}

// checkTrimmed asserts what every build strips: the purged packages are
// gone from the package list, no setid file and no device node is left.
func checkTrimmed(t *testing.T, r *rootfs.Rootfs, purged ...string) {
	t.Helper()
	tr := r.Meta.Trim
	if tr == nil {
		t.Fatal("meta has no trim record")
	}
	for _, p := range purged {
		if !slices.Contains(tr.Purged, p) {
			t.Errorf("%s not in trim.purged %v", p, tr.Purged)
		}
		for _, pkg := range r.Meta.Packages {
			if pkg.Name == p {
				t.Errorf("purged %s still in the package list", p)
			}
		}
	}
	if len(tr.StrippedSetid) == 0 {
		t.Error("no setid bits stripped: Debian's su and passwd have them")
	}
	filepath.WalkDir(r.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type()&(fs.ModeDevice|fs.ModeCharDevice) != 0 {
			t.Errorf("device node left: %s", p)
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil && info.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
				t.Errorf("setid file left: %s", p)
			}
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(r.Dir, "dev")); err != nil {
		t.Errorf("/dev mount point: %v", err)
	}
}

func TestBuildErrors(t *testing.T) {
	s := rootfs.Store{Root: t.TempDir()}
	tests := []struct {
		name string
		o    Options
		want error
	}{
		{"bad name", Options{Name: "Bad/Name"}, rootfs.ErrInvalidName},
		{"unknown profile", Options{Name: "x", Profile: "gpu"}, ErrUnknownProfile},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Run(context.Background(), s, tc.o, nil); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if os.Geteuid() != 0 {
		if _, err := Run(context.Background(), s, Options{Name: "x", Profile: "minimal"}, nil); !errors.Is(err, ErrNotRoot) {
			t.Errorf("non-root build: %v, want ErrNotRoot", err)
		}
	}
}
