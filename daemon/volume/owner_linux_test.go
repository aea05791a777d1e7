package volume

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOnDiskOwner: a volume made when files were uid 1000 on disk (a real
// login on many hosts) is moved at start to the on-disk owner, which is
// no host account's by default: every file, directory and symlink the
// old owner had, at any depth, and the root; what another id owns is
// left as it is, and a set-id bit goes with the move. New files (the
// file API's, a new volume's root) get the owner, and Acquire names it for
// the sandbox's idmapped mount. An operator's later choice moves them again.
func TestOnDiskOwner(t *testing.T) {
	requireRoot(t)
	state, run := t.TempDir(), t.TempDir()
	s, err := OpenOwned(state, run, LegacyOwnerID, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() }) // whichever store is open last
	if _, err := s.Create("old", MinSize, NoOwner); err != nil {
		t.Fatal(err)
	}
	root := s.Path("old")
	deep := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	type owner struct{ uid, gid int }
	legacy := owner{LegacyOwnerID, LegacyOwnerID}
	paths := map[string]owner{ // on disk before, after: see below
		"a": legacy, "a/b": legacy, "a/b/f": legacy, "suid": legacy, "link": legacy,
		"root-file": {0, 0}, "mixed": {LegacyOwnerID, 0},
	}
	for p, o := range paths {
		full := filepath.Join(root, p)
		switch p {
		case "a", "a/b":
		case "link":
			if err := os.Symlink("/etc/passwd", full); err != nil {
				t.Fatal(err)
			}
		default:
			if err := os.WriteFile(full, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Lchown(full, o.uid, o.gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "suid"), 0o4755); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	check := func(s *Store, to int) {
		t.Helper()
		want := map[string]owner{".": {to, to}, "root-file": {0, 0}, "mixed": {to, 0}}
		for p, o := range paths {
			if _, ok := want[p]; !ok && o == legacy {
				want[p] = owner{to, to}
			}
		}
		for p, o := range want {
			var st unix.Stat_t
			if err := unix.Lstat(filepath.Join(s.Path("old"), p), &st); err != nil {
				t.Fatal(err)
			}
			if (owner{int(st.Uid), int(st.Gid)}) != o {
				t.Errorf("owner %d: %s is %d:%d on disk, want %d:%d", to, p, st.Uid, st.Gid, o.uid, o.gid)
			}
			if p == "suid" && st.Mode&unix.S_ISUID != 0 {
				t.Errorf("owner %d: suid kept its set-uid bit through the move", to)
			}
		}
		_, got, release, err := s.Acquire("old", nil)
		if err != nil {
			t.Fatal(err)
		}
		release()
		if got != to {
			t.Errorf("Acquire's on-disk owner %d, want %d", got, to)
		}
		ws, err := s.Files("old", nil)
		if err != nil {
			t.Fatal(err)
		}
		name := "api-" + filepath.Base(t.TempDir())
		err = ws.WriteFile(name, []byte("y"), 0o644)
		ws.Close()
		if err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(s.Path("old"), name), &st); err != nil || int(st.Uid) != to || int(st.Gid) != to {
			t.Errorf("owner %d: a file the API wrote is %d:%d (%v)", to, st.Uid, st.Gid, err)
		}
	}

	s, err = Open(state, run, nil)
	if err != nil {
		t.Fatal(err)
	}
	if DefaultOwnerID == LegacyOwnerID || ValidOwnerID(DefaultOwnerID) != nil {
		t.Fatalf("default on-disk owner %d", DefaultOwnerID)
	}
	check(s, DefaultOwnerID)
	if _, err := s.Create("new", MinSize, NoOwner); err != nil {
		t.Fatal(err)
	}
	if uid := rootOwner(t, s, "new"); uid != DefaultOwnerID {
		t.Errorf("a new volume's root is %d's, want %d's", uid, DefaultOwnerID)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	const chosen = 900000000
	if s, err = OpenOwned(state, run, chosen, nil); err != nil {
		t.Fatal(err)
	}
	check(s, chosen)
	if uid := rootOwner(t, s, "new"); uid != chosen {
		t.Errorf("the other volume's root after the choice is %d's, want %d's", uid, chosen)
	}
	if _, err := OpenOwned(t.TempDir(), t.TempDir(), 0, nil); err == nil {
		t.Error("OpenOwned with owner 0 (root) succeeded")
	}
}

func rootOwner(t *testing.T, s *Store, name string) int {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(s.Path(name), &st); err != nil {
		t.Fatal(err)
	}
	return int(st.Uid)
}
