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
	in, err := s.Create("data", MinSize, NoOwner)
	if err != nil {
		t.Fatal(err)
	}
	if in.SizeBytes != MinSize || in.UsedBytes <= 0 {
		t.Errorf("info %+v", in)
	}
	if _, err := s.Create("data", MinSize, NoOwner); !errors.Is(err, ErrExists) {
		t.Errorf("create twice: %v, want ErrExists", err)
	}
	for _, bad := range []struct {
		name string
		size int64
	}{{"Data", MinSize}, {"../x", MinSize}, {"ok", MinSize - 1}, {"ok", MaxSize + 1}} {
		if _, err := s.Create(bad.name, bad.size, NoOwner); !errors.Is(err, ErrInvalid) {
			t.Errorf("create %q %d: %v, want ErrInvalid", bad.name, bad.size, err)
		}
	}
	ws, err := s.Files("data", nil)
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
	ws, err = s.Files("data", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ws.ReadFile("dir/kept.txt", 100)
	ws.Close()
	if err != nil || string(got) != "kept" {
		t.Fatalf("after reopening: %q, %v", got, err)
	}
	_, release, err := s.Acquire("data", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("data", nil); !errors.Is(err, ErrInUse) {
		t.Errorf("delete in use: %v, want ErrInUse", err)
	}
	release()
	if err := s.Delete("data", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("data", nil); !errors.Is(err, ErrNotFound) {
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
	if _, err := s.Create("a", MinSize, NoOwner); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create("big", 60<<20, NoOwner); !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "may still grow by") {
		t.Fatalf("a 60 MiB volume on a 64 MiB disk holding a 16 MiB one: %v, want ErrNoSpace", err)
	}
	if _, err := s.Create("b", MinSize, NoOwner); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create("c", MinSize, NoOwner); !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "its maximum") {
		t.Fatalf("a third volume with maxCount 2: %v, want ErrNoSpace", err)
	}
	for _, name := range []string{"big", "c"} {
		if _, err := os.Stat(filepath.Join(state, "volumes", name)); !os.IsNotExist(err) {
			t.Errorf("a refused volume left %s: %v", name, err)
		}
	}
	for _, name := range []string{"a", "b"} {
		if err := s.Delete(name, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStoreOwners: a volume belongs to the uid that made it, through a
// reopen; an Access that refuses its owner finds nothing of it (not
// listed, not found by Get, Delete, Acquire or Files), and a refused
// Delete leaves it whole. A volume without an owner file (made before
// owners) is NoOwner, which every Access that allows it sees.
func TestStoreOwners(t *testing.T) {
	requireRoot(t)
	state, run := t.TempDir(), t.TempDir()
	s, err := Open(state, run, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	const alice, mallory = 4242, 4343
	as := func(uid int64) Access { return func(owner int64) bool { return owner == NoOwner || owner == uid } }
	if in, err := s.Create("alices", MinSize, alice); err != nil || in.Owner != alice {
		t.Fatalf("create: %+v %v", in, err)
	}
	if _, err := s.Create("alices", MinSize, mallory); !errors.Is(err, ErrExists) {
		t.Errorf("another owner takes the name: %v, want ErrExists", err)
	}
	if got := s.List(as(mallory)); len(got) != 0 {
		t.Errorf("mallory lists %+v", got)
	}
	if _, err := s.Get("alices", as(mallory)); !errors.Is(err, ErrNotFound) {
		t.Errorf("mallory gets: %v, want ErrNotFound", err)
	}
	if _, _, err := s.Acquire("alices", as(mallory)); !errors.Is(err, ErrNotFound) {
		t.Errorf("mallory acquires: %v, want ErrNotFound", err)
	}
	if ws, err := s.Files("alices", as(mallory)); !errors.Is(err, ErrNotFound) {
		if ws != nil {
			ws.Close()
		}
		t.Errorf("mallory opens the files: %v, want ErrNotFound", err)
	}
	if err := s.Delete("alices", as(mallory)); !errors.Is(err, ErrNotFound) {
		t.Errorf("mallory deletes: %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(filepath.Join(state, "volumes", "alices", imageName)); err != nil {
		t.Fatalf("after mallory's delete: %v", err)
	}
	if _, err := s.Create("legacy", MinSize, NoOwner); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(state, run, nil); err != nil {
		t.Fatal(err)
	}
	got := s.List(as(alice))
	if len(got) != 2 || got[0].Name != "alices" || got[0].Owner != alice || got[1].Name != "legacy" || got[1].Owner != NoOwner {
		t.Fatalf("alice lists after a reopen %+v, want alices (owner %d) and legacy (none)", got, alice)
	}
	if got := s.List(as(mallory)); len(got) != 1 || got[0].Name != "legacy" {
		t.Errorf("mallory lists %+v, want only the ownerless volume", got)
	}
	if err := s.Delete("alices", as(alice)); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("legacy", as(mallory)); err != nil {
		t.Fatal(err)
	}
}
