package volume

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func requireRoot(t testing.TB) {
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
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
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
	_, _, release, err := s.Acquire("data", nil)
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
// creates cannot take more than the disk under the store holds (each
// image is reserved whole), nor more than maxCount loop devices; each
// refusal leaves nothing.
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
	if _, err := s.Create("big", 60<<20, NoOwner); !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "bytes free") {
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
	if _, _, _, err := s.Acquire("alices", as(mallory)); !errors.Is(err, ErrNotFound) {
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

// smallDisk mounts a tmpfs of size bytes on a new temp dir (unmounted at
// cleanup): a host disk the test can fill.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// fillUntilFull writes data to path until the filesystem says ENOSPC,
// and returns how many bytes it took; another error fails t.
func fillUntilFull(t *testing.T, path string, data []byte) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n int64
	for {
		w, err := f.Write(data)
		n += int64(w)
		if errors.Is(err, unix.ENOSPC) {
			return n
		}
		if err != nil {
			t.Fatalf("fill %s: %v", path, err)
		}
	}
}

// TestVolumeHoldsWhenTheHostDiskFills: a volume's image is reserved on the
// host at create, so once another writer has filled the host's disk, the
// volume still takes every byte its own filesystem has room for, fsync
// says so truthfully, and the bytes are there after an unmount and a
// reopen (a sparse image lost them: the loop device's writes failed with
// "lost async page write" while the writer inside saw success).
func TestVolumeHoldsWhenTheHostDiskFills(t *testing.T) {
	requireRoot(t)
	state, run := smallDisk(t, "64m"), t.TempDir()
	s, err := Open(state, run, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	if _, err := s.Create("v", 32<<20, NoOwner); err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 1<<20)
	for i := range block {
		block[i] = byte(i*7 + i>>8)
	}
	if filler := fillUntilFull(t, filepath.Join(state, "filler"), block); filler < 16<<20 {
		t.Fatalf("the host disk filled after %d bytes: the volume took more than its size?", filler)
	}

	in := filepath.Join(s.Path("v"), "data")
	wrote := fillUntilFull(t, in, block)
	if wrote < 24<<20 {
		t.Fatalf("a 32 MiB volume on a full host disk took %d bytes before ENOSPC, want its own capacity", wrote)
	}
	f, err := os.OpenFile(in, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync of %d bytes in the volume on a full host disk: %v", wrote, err)
	}
	f.Close()

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(state, run, nil); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(got)) != wrote {
		t.Fatalf("after a reopen the file has %d bytes, %d were written", len(got), wrote)
	}
	for off := 0; off < len(got); off += len(block) {
		if end := min(off+len(block), len(got)); !bytes.Equal(got[off:end], block[:end-off]) {
			i := off
			for got[i] == block[i-off] {
				i++
			}
			t.Fatalf("after a reopen the bytes at %d differ from what was written: %x, want %x", i, got[i:i+16], block[i-off:i-off+16])
		}
	}
}

// allocated reports whether img has every block of its size.
func allocated(t *testing.T, img string) bool {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(img, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks*512 >= st.Size
}

// punchTail punches a hole in the last 4 MiB of img, which a new
// volume's filesystem does not use: what a trim of the volume, or a
// daemon from before reservations, leaves.
func punchTail(t *testing.T, img string) {
	t.Helper()
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, st.Size()-4<<20, 4<<20); err != nil {
		t.Fatal(err)
	}
	if allocated(t, img) {
		t.Fatal("the punched image is still whole")
	}
}

// trim is fstrim(8) on the filesystem mounted at dir: FITRIM over all of
// it, which a loop device turns into holes punched in its image.
func trim(t *testing.T, dir string) {
	t.Helper()
	const fitrim = 0xc0185879 // _IOWR('X', 121, struct fstrim_range)
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := struct{ start, len, minlen uint64 }{0, ^uint64(0), 0}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fitrim, uintptr(unsafe.Pointer(&r))); errno != 0 {
		t.Fatalf("FITRIM %s: %v", dir, errno)
	}
}

// TestStoreReservesHoles: holes in an image (a trim of its filesystem,
// or a daemon from before reservations) are filled before the volume is used and at
// start; when the host's disk cannot fill them, a use is refused with
// ErrNoSpace, and at start the volume is mounted read-only (its data
// readable, a write EROFS) rather than able to lose a write.
func TestStoreReservesHoles(t *testing.T) {
	requireRoot(t)
	state, run := smallDisk(t, "64m"), t.TempDir()
	s, err := Open(state, run, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	if _, err := s.Create("v", 32<<20, NoOwner); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(state, "volumes", "v", imageName)
	if !allocated(t, img) {
		t.Fatal("a new volume's image has holes")
	}
	if err := os.WriteFile(filepath.Join(s.Path("v"), "kept"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}

	// A trim (what the host's fstrim does) punches holes through the loop
	// device; with the host's disk full, no use until there is room again.
	trim(t, s.Path("v"))
	if allocated(t, img) {
		t.Fatal("the trimmed image is still whole")
	}
	filler := filepath.Join(state, "filler")
	fillUntilFull(t, filler, make([]byte, 1<<20))
	if _, _, _, err := s.Acquire("v", nil); !errors.Is(err, ErrNoSpace) {
		t.Errorf("acquire with holes on a full disk: %v, want ErrNoSpace", err)
	}
	if ws, err := s.Files("v", nil); !errors.Is(err, ErrNoSpace) {
		if ws != nil {
			ws.Close()
		}
		t.Errorf("files with holes on a full disk: %v, want ErrNoSpace", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	_, _, release, err := s.Acquire("v", nil)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if !allocated(t, img) {
		t.Error("acquire with room left the holes")
	}

	// At start: with room, the holes are filled; without, read-only.
	for _, full := range []bool{false, true} {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		punchTail(t, img)
		if full {
			fillUntilFull(t, filler, make([]byte, 1<<20))
		}
		if s, err = Open(state, run, nil); err != nil {
			t.Fatal(err)
		}
		in, err := s.Get("v", nil)
		if err != nil {
			t.Fatal(err)
		}
		if in.ReadOnly != full || allocated(t, img) == full {
			t.Errorf("reopened on a full disk %v: read-only %v, image whole %v", full, in.ReadOnly, allocated(t, img))
		}
		if got, err := os.ReadFile(filepath.Join(s.Path("v"), "kept")); err != nil || string(got) != "kept" {
			t.Errorf("reopened on a full disk %v: read %q, %v", full, got, err)
		}
	}
	err = os.WriteFile(filepath.Join(s.Path("v"), "new"), []byte("x"), 0o644)
	if !errors.Is(err, unix.EROFS) {
		t.Errorf("a write to the volume left read-only: %v, want EROFS", err)
	}
}

// TestReleaseStripsSetID: set-id bits a sandbox gave files on a volume
// are gone once its use ends (an image mounted outside nsbox would carry
// them), at any depth, and the walk follows no symlink: a
// set-id file outside the volume that a symlink in it names keeps its bits.
func TestReleaseStripsSetID(t *testing.T) {
	requireRoot(t)
	s, err := Open(t.TempDir(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	if _, err := s.Create("v", MinSize, NoOwner); err != nil {
		t.Fatal(err)
	}
	dir, _, release, err := s.Acquire("v", nil)
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "host-suid")
	deep := filepath.Join(dir, "a", "b", "c")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]os.FileMode{
		filepath.Join(dir, "suid"):  0o755 | os.ModeSetuid,
		filepath.Join(dir, "sgid"):  0o755 | os.ModeSetgid,
		filepath.Join(deep, "both"): 0o755 | os.ModeSetuid | os.ModeSetgid | os.ModeSticky,
		filepath.Join(dir, "plain"): 0o640,
		outside:                     0o755 | os.ModeSetuid,
	}
	for p, m := range files {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	release()
	for p, m := range files {
		want := m &^ (os.ModeSetuid | os.ModeSetgid)
		if p == outside {
			want = m
		}
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode() != want {
			t.Errorf("%s: %v %v, want %v", p, fi.Mode(), err, want)
		}
	}
}
