package rootfs

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildMinimal runs a real mmdebstrap build (network, ~40 s).
func TestBuildMinimal(t *testing.T) {
	if os.Getenv("NSBOX_TEST_BUILD") != "1" {
		t.Skip("slow real build: set NSBOX_TEST_BUILD=1 (needs root, mmdebstrap and a Debian mirror)")
	}
	requireRoot(t)
	s := Store{Root: t.TempDir()}
	var phases []string
	r, err := s.Build(context.Background(), BuildOptions{Name: "t", Profile: "minimal"}, func(p Progress) {
		if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
			phases = append(phases, p.Phase)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("phases %v, size %s, %d packages, python %s", phases, HumanSize(r.Meta.SizeBytes), len(r.Meta.Packages), r.Meta.Python)
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
}

func TestBuildErrors(t *testing.T) {
	s := Store{Root: t.TempDir()}
	tests := []struct {
		name string
		o    BuildOptions
		want error
	}{
		{"bad name", BuildOptions{Name: "Bad/Name"}, ErrInvalidName},
		{"unknown profile", BuildOptions{Name: "x", Profile: "gpu"}, ErrUnknownProfile},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Build(context.Background(), tc.o, nil); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if os.Geteuid() != 0 {
		if _, err := s.Build(context.Background(), BuildOptions{Name: "x", Profile: "minimal"}, nil); !errors.Is(err, ErrNotRoot) {
			t.Errorf("non-root build: %v, want ErrNotRoot", err)
		}
	}
}
