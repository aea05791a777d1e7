package volume

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: volumes are loop-mounted ext4 images")
	}
	for _, tool := range []string{"mkfs.ext4", "e2fsck"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (e2fsprogs)", tool)
		}
	}
}

// assertDetached fails t unless no loop device holds img (autoclear may
// take a moment after the last unmount).
func assertDetached(t *testing.T, img string) {
	t.Helper()
	var out []byte
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		out, _ = exec.Command("losetup", "-j", img).Output()
		if len(strings.TrimSpace(string(out))) == 0 {
			return
		}
	}
	t.Errorf("a loop device still holds %s: %s", img, out)
}

func TestStorePersistsAndCleansUp(t *testing.T) {
	requireRoot(t)
	state, run := t.TempDir(), t.TempDir()
	s, err := Open(state, run, nil)
	if err != nil {
		t.Fatal(err)
	}
	in, err := s.Create("data", MinSize)
	if err != nil {
		t.Fatal(err)
	}
	if in.SizeBytes != MinSize || in.UsedBytes <= 0 {
		t.Errorf("info %+v", in)
	}
	if _, err := s.Create("data", MinSize); !errors.Is(err, ErrExists) {
		t.Errorf("create twice: %v, want ErrExists", err)
	}
	for _, bad := range []struct {
		name string
		size int64
	}{{"Data", MinSize}, {"../x", MinSize}, {"ok", MinSize - 1}, {"ok", MaxSize + 1}} {
		if _, err := s.Create(bad.name, bad.size); !errors.Is(err, ErrInvalid) {
			t.Errorf("create %q %d: %v, want ErrInvalid", bad.name, bad.size, err)
		}
	}
	ws, err := s.Files("data")
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteFile("dir/kept.txt", []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(state, "volumes", "data", imageName)
	assertDetached(t, img)
	if isMountRoot(filepath.Join(run, "volumes", "data")) {
		t.Error("still mounted after Close")
	}

	s, err = Open(state, run, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws, err = s.Files("data")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ws.ReadFile("dir/kept.txt", 100)
	ws.Close()
	if err != nil || string(got) != "kept" {
		t.Fatalf("after reopening: %q, %v", got, err)
	}
	_, release, err := s.Acquire("data")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("data"); !errors.Is(err, ErrInUse) {
		t.Errorf("delete in use: %v, want ErrInUse", err)
	}
	release()
	if err := s.Delete("data"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("data"); !errors.Is(err, ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
	assertDetached(t, img)
	if _, err := os.Stat(filepath.Dir(img)); !os.IsNotExist(err) {
		t.Errorf("state left after delete: %v", err)
	}
	s.Close()
}

// TestStoreRefusesWhatTheDiskCannotHold checks that a flood of volume
// creates cannot promise more than the disk under the store holds (the
// images are sparse: sandboxes filling them would fill the host's disk),
// nor take more than maxCount loop devices; each refusal leaves nothing.
func TestStoreRefusesWhatTheDiskCannotHold(t *testing.T) {
	requireRoot(t)
	state, run := t.TempDir(), t.TempDir()
	if err := unix.Mount("tmpfs", state, "tmpfs", 0, "size=64m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(state, unix.MNT_DETACH) })
	s, err := Open(state, run, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.maxCount = 2
	if _, err := s.Create("a", MinSize); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create("big", 60<<20); !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "may still grow by") {
		t.Fatalf("a 60 MiB volume on a 64 MiB disk holding a 16 MiB one: %v, want ErrNoSpace", err)
	}
	if _, err := s.Create("b", MinSize); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create("c", MinSize); !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "its maximum") {
		t.Fatalf("a third volume with maxCount 2: %v, want ErrNoSpace", err)
	}
	for _, name := range []string{"big", "c"} {
		if _, err := os.Stat(filepath.Join(state, "volumes", name)); !os.IsNotExist(err) {
			t.Errorf("a refused volume left %s: %v", name, err)
		}
	}
	for _, name := range []string{"a", "b"} {
		if err := s.Delete(name); err != nil {
			t.Fatal(err)
		}
	}
}
