package mnt

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container/internal/testenv"
)

// diskOwner owns the test's files on disk; host is the id the idmap
// shows them as (no sandbox's id, no real user's).
const (
	diskOwner = 4242
	host      = 0x50000001
)

// TestTmpfs: the /mnt tmpfs holds one directory per name and takes no
// new entry (it is read-only), so a sandbox cannot add mount points.
func TestTmpfs(t *testing.T) {
	testenv.RequireRoot(t)
	f, err := Tmpfs([]string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, n := range []string{"a", "b"} {
		var st unix.Stat_t
		if err := unix.Fstatat(int(f.Fd()), n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			t.Errorf("/mnt/%s: %v (mode %o), want a directory", n, err, st.Mode)
		}
	}
	if err := unix.Mkdirat(int(f.Fd()), "c", 0o755); !errors.Is(err, unix.EROFS) {
		t.Errorf("mkdir in the /mnt tmpfs: %v, want EROFS", err)
	}
}

// TestClone: an idmapped clone shows diskOwner's file as the host id's,
// and a read-only one refuses a write.
func TestClone(t *testing.T) {
	testenv.RequireRoot(t)
	src := t.TempDir()
	file := filepath.Join(src, "owned.txt")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(file, diskOwner, diskOwner); err != nil {
		t.Fatal(err)
	}
	var c Cache
	defer c.Close()
	ns, err := c.Get(Key{DiskUID: diskOwner, DiskGID: diskOwner, Host: host})
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := c.Get(Key{DiskUID: diskOwner, DiskGID: diskOwner, Host: host}); again != ns {
		t.Error("the cache made a second namespace for the same key")
	}
	f, err := Clone(src, "/mnt/x", true, false, ns)
	if err != nil {
		t.Skipf("the filesystem of %s takes no idmapped mounts on this kernel (set TMPDIR to ext4, xfs, btrfs or tmpfs on 6.3+): %v", src, err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstatat(int(f.Fd()), "owned.txt", &st, 0); err != nil {
		t.Fatal(err)
	}
	if st.Uid != host || st.Gid != host {
		t.Errorf("owned.txt through the idmap: uid %d gid %d, want %d", st.Uid, st.Gid, host)
	}
	if err := unix.Mkdirat(int(f.Fd()), "new", 0o755); !errors.Is(err, unix.EROFS) {
		t.Errorf("mkdir in a read-only clone: %v, want EROFS", err)
	}
}

// BenchmarkIdmapParts: what one mount costs host-side: making an idmap
// user namespace (done once per on-disk owner and host id, then cached),
// and cloning and idmapping the directory (done for every sandbox).
func BenchmarkIdmapParts(b *testing.B) {
	testenv.RequireRoot(b)
	src := b.TempDir()
	b.Run("new-userns", func(b *testing.B) {
		for b.Loop() {
			f, err := NewUserns(Key{DiskUID: diskOwner, DiskGID: diskOwner, Host: host})
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
	ns, err := NewUserns(Key{DiskUID: diskOwner, DiskGID: diskOwner, Host: host})
	if err != nil {
		b.Fatal(err)
	}
	defer ns.Close()
	b.Run("clone-and-idmap", func(b *testing.B) {
		for b.Loop() {
			f, err := Clone(src, "/mnt/x", true, false, ns)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
	b.Run("mnt-tmpfs", func(b *testing.B) {
		for b.Loop() {
			f, err := Tmpfs([]string{"a", "b"})
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
}
