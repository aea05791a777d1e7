package workspace

import (
	"archive/tar"
	"bytes"
	"errors"
	"maps"
	"os"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// setXattr sets an extended attribute of p as the sandbox could (the test
// reaches p beneath the workspace, nothing followed).
func setXattr(t *testing.T, w *Workspace, p, name, value string) {
	t.Helper()
	fd, err := w.openat(p, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Fsetxattr(fd, name, []byte(value), 0); err != nil {
		t.Fatalf("set %s of %s: %v", name, p, err)
	}
}

// xattrs returns every extended attribute of p (in any namespace).
func xattrs(t *testing.T, w *Workspace, p string) map[string]string {
	t.Helper()
	fd, err := w.openat(p, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	list := make([]byte, 64<<10)
	n, err := unix.Flistxattr(fd, list)
	if err != nil {
		t.Fatalf("list xattrs of %s: %v", p, err)
	}
	out := map[string]string{}
	for _, name := range strings.Split(string(list[:n]), "\x00") {
		if name == "" || strings.HasPrefix(name, "security.selinux") {
			continue
		}
		v := make([]byte, 64<<10)
		m, err := unix.Fgetxattr(fd, name, v)
		if err != nil {
			t.Fatalf("get %s of %s: %v", name, p, err)
		}
		out[name] = string(v[:m])
	}
	return out
}

// TestArchiveKeepsMeta: a round trip through WriteTar and ReadTar keeps
// the user.e2b.* xattrs of files and directories, as PAX records GNU tar
// reads, and only those; past MetaMax the rest, names in order, is left out.
func TestArchiveKeepsMeta(t *testing.T) {
	src, dst := newTestWorkspace(t, 8<<20), newTestWorkspace(t, 8<<20)
	plant(t, src, "d/", "d/f.txt", "top.txt", "big.txt", "link -> d/f.txt")
	setXattr(t, src, "d/f.txt", "user.e2b.owner", "alice")
	setXattr(t, src, "d/f.txt", "user.e2b.kind", "report")
	setXattr(t, src, "d", "user.e2b.dir", "yes")
	setXattr(t, src, "top.txt", "user.other", "not carried")
	setXattr(t, src, "top.txt", "trusted.t", "not carried")
	big := strings.Repeat("b", MetaMax-len("user.e2b.a")-len("user.e2b.c")-1)
	setXattr(t, src, "big.txt", "user.e2b.a", big)
	setXattr(t, src, "big.txt", "user.e2b.b", "past the bound")
	setXattr(t, src, "big.txt", "user.e2b.c", "")

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := src.WriteTar(tw); err != nil {
		t.Fatalf("WriteTar: %v", err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	recs := map[string]map[string]string{}
	tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		recs[hdr.Name] = hdr.PAXRecords
	}
	if got := recs["d/f.txt"]["SCHILY.xattr.user.e2b.owner"]; got != "alice" {
		t.Errorf("archive's d/f.txt: records %v, want SCHILY.xattr.user.e2b.owner=alice", recs["d/f.txt"])
	}
	if err := dst.ReadTar(tar.NewReader(&buf)); err != nil {
		t.Fatalf("ReadTar: %v", err)
	}
	for p, want := range map[string]map[string]string{
		"d/f.txt": {"user.e2b.owner": "alice", "user.e2b.kind": "report"},
		"d":       {"user.e2b.dir": "yes"},
		"top.txt": {},
		"big.txt": {"user.e2b.a": big, "user.e2b.c": ""},
	} {
		if got := xattrs(t, dst, p); !maps.Equal(got, want) {
			t.Errorf("%s: xattrs %v, want %v", p, keys(got), keys(want))
		}
	}
	if n := dst.MetaLost(); n != 0 {
		t.Errorf("MetaLost %d, want 0", n)
	}
}

// TestReadTarMetaNamespaces: a hostile archive's records for other
// namespaces (security.*, trusted.*, system.*, user.* outside user.e2b.)
// are ignored, not applied and not a failure, and its user.e2b.* past
// MetaMax are left out; a symlink's are never applied.
func TestReadTarMetaNamespaces(t *testing.T) {
	w := newTestWorkspace(t, 8<<20)
	hostile := map[string]string{
		"SCHILY.xattr.security.x":                            "1",
		"SCHILY.xattr.security.capability":                   "\x01\x00\x00\x02\xff\xff\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00",
		"SCHILY.xattr.trusted.x":                             "1",
		"SCHILY.xattr.trusted.overlay.opaque":                "y",
		"SCHILY.xattr.system.posix_acl_access":               "not an acl",
		"SCHILY.xattr.user.other":                            "1",
		"SCHILY.xattr.user.e2b.":                             "no key",
		"SCHILY.xattr.user.e2b.ok":                           "yes",
		"SCHILY.xattr.user.e2b.z" + strings.Repeat("z", 100): strings.Repeat("v", MetaMax),
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, hdr := range []*tar.Header{
		{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755, PAXRecords: hostile},
		{Name: "d/f", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1, PAXRecords: hostile},
		{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "d/f", PAXRecords: hostile},
	} {
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Size > 0 {
			tw.Write([]byte("x"))
		}
	}
	tw.Close()
	if err := w.ReadTar(tar.NewReader(&buf)); err != nil {
		t.Fatalf("ReadTar: %v", err)
	}
	for _, p := range []string{"d", "d/f"} {
		if got, want := xattrs(t, w, p), map[string]string{"user.e2b.ok": "yes"}; !maps.Equal(got, want) {
			t.Errorf("%s: xattrs %v, want only user.e2b.ok", p, keys(got))
		}
	}
}

// TestReadTarMetaWithoutXattrs: on a filesystem that keeps no user xattrs
// (ramfs) the files are restored without their metadata, counted.
func TestReadTarMetaWithoutXattrs(t *testing.T) {
	src := newTestWorkspace(t, 8<<20)
	plant(t, src, "d/", "d/f.txt", "plain.txt")
	setXattr(t, src, "d/f.txt", "user.e2b.k", "v")
	setXattr(t, src, "d", "user.e2b.k", "v")
	dst := newRamfs(t)
	if err := src.CopyTo(dst); err != nil {
		t.Fatalf("CopyTo onto ramfs: %v", err)
	}
	if got, err := dst.ReadFile("d/f.txt", 1<<20); err != nil || string(got) != "in:d/f.txt" {
		t.Errorf("d/f.txt: %q %v", got, err)
	}
	if n := dst.MetaLost(); n != 2 {
		t.Errorf("MetaLost %d, want 2 (d and d/f.txt)", n)
	}
}

// newRamfs is a workspace over a detached ramfs, which keeps no user xattrs.
func newRamfs(t *testing.T) *Workspace {
	t.Helper()
	newTestWorkspace(t, 1<<20) // root, or skip
	fsfd, err := unix.Fsopen("ramfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		t.Skipf("no ramfs: %v", err)
	}
	defer unix.Close(fsfd)
	if err := unix.FsconfigCreate(fsfd); err != nil {
		t.Fatal(err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := &Workspace{mnt: os.NewFile(uintptr(mfd), "ramfs"), fd: mfd, uid: testUID, gid: testGID}
	t.Cleanup(func() { w.Close() })
	root, err := w.openDir("")
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(root)
	if err := unix.Fsetxattr(root, "user.e2b.probe", []byte("x"), 0); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Skipf("ramfs here keeps user xattrs (%v)", err)
	}
	return w
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
