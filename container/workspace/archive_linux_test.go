package workspace

import (
	"archive/tar"
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCopyTo copies files, directories, modes and symlinks; a symlink
// pointing outside stays a symlink and the host file it names is never
// read nor written.
func TestCopyTo(t *testing.T) {
	src, dst := newTestWorkspace(t, 8<<20), newTestWorkspace(t, 8<<20)
	canary := newHostCanary(t)
	plant(t, src, "d/", "d/e/", "d/e/f.txt", "top.txt", "out -> "+filepath.Join(canary.dir, "victim"), "d/up -> ../top.txt")
	if err := unix.Fchmodat(src.fd, "top.txt", 0o600, 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fchmodat(src.fd, "d/e", 0o700, 0); err != nil {
		t.Fatal(err)
	}
	if err := src.CopyTo(dst); err != nil {
		t.Fatalf("CopyTo: %v", err)
	}
	for p, want := range map[string]string{"d/e/f.txt": "in:d/e/f.txt", "top.txt": "in:top.txt"} {
		got, err := dst.ReadFile(p, 1<<20)
		if err != nil || string(got) != want {
			t.Errorf("%s: %q %v", p, got, err)
		}
	}
	for p, mode := range map[string]uint32{"top.txt": 0o600, "d/e": 0o700, "d/e/f.txt": 0o644} {
		e, err := dst.Stat(p)
		if err != nil || e.Mode != mode {
			t.Errorf("%s: mode %o, want %o (%v)", p, e.Mode, mode, err)
		}
	}
	for p, target := range map[string]string{"out": filepath.Join(canary.dir, "victim"), "d/up": "../top.txt"} {
		e, err := dst.Stat(p)
		if err != nil || !e.Symlink || e.Target != target {
			t.Errorf("%s: %+v %v, want a symlink to %s", p, e, err, target)
		}
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dst.fd, "d/e/f.txt", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Uid != testUID || st.Gid != testGID {
		t.Errorf("owner of a copied file: %d:%d %v", st.Uid, st.Gid, err)
	}
	canary.check(t)
}

// TestReadTarRefuses: an archive cannot write through a symlink it made,
// nor name a path outside the workspace.
func TestReadTarRefuses(t *testing.T) {
	canary := newHostCanary(t)
	for _, tc := range []struct {
		name string
		hdrs []tar.Header
	}{
		{"dotdot", []tar.Header{{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644}}},
		{"absolute", []tar.Header{{Name: "/etc/x", Typeflag: tar.TypeReg, Mode: 0o644}}},
		{"through a symlink", []tar.Header{
			{Name: "l", Typeflag: tar.TypeSymlink, Linkname: canary.dir},
			{Name: "l/victim", Typeflag: tar.TypeReg, Mode: 0o644},
		}},
		{"a device", []tar.Header{{Name: "dev", Typeflag: tar.TypeChar, Mode: 0o644}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, h := range tc.hdrs {
				if err := tw.WriteHeader(&h); err != nil {
					t.Fatal(err)
				}
			}
			tw.Close()
			w := newTestWorkspace(t, 1<<20)
			err := w.ReadTar(tar.NewReader(&buf))
			if !errors.Is(err, ErrInvalidPath) && !errors.Is(err, ErrNotRegular) {
				t.Fatalf("ReadTar: %v, want a refusal", err)
			}
			canary.check(t)
		})
	}
}

// TestCopyToFull: a copy into a smaller workspace fails with ErrFull.
func TestCopyToFull(t *testing.T) {
	src, dst := newTestWorkspace(t, 8<<20), newTestWorkspace(t, 1<<20)
	if err := src.WriteFile("big", bytes.Repeat([]byte("x"), 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := src.CopyTo(dst); !errors.Is(err, ErrFull) {
		t.Fatalf("CopyTo into a small workspace: %v", err)
	}
}

// FuzzReadTarStaysBeneath extracts arbitrary archives (and arbitrary
// headers over the planted escape links) into a workspace: whatever
// ReadTar answers, the host canary behind the links is untouched.
func FuzzReadTarStaysBeneath(f *testing.F) {
	for _, l := range linkNames {
		f.Add(l+"/victim", byte(tar.TypeReg), "", []byte("x"))
		f.Add(l+"/vdir/", byte(tar.TypeDir), "", []byte(nil))
		f.Add(l+"/new", byte(tar.TypeSymlink), "/etc", []byte(nil))
	}
	f.Add("../x", byte(tar.TypeReg), "", []byte("x"))
	f.Add("ok/file", byte(tar.TypeReg), "", []byte("data"))
	for _, l := range []string{"host", "d/host", "e/host"} { // raw archives with metadata, through the links
		f.Add("ok/file", byte(tar.TypeReg), "", metaArchive(f, l+"/victim", tar.TypeReg))
		f.Add("ok/file", byte(tar.TypeReg), "", metaArchive(f, l+"/vdir/", tar.TypeDir))
	}
	c := newHostCanary(f)
	f.Fuzz(func(t *testing.T, name string, typ byte, link string, data []byte) {
		w := newTestWorkspace(t, 1<<20)
		plant(t, w, escapeLinks(c)...)
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		hdr := &tar.Header{Name: name, Typeflag: typ, Linkname: link, Mode: 0o4755, Size: int64(len(data))}
		if typ != tar.TypeReg {
			hdr.Size = 0
		}
		if tw.WriteHeader(hdr) != nil {
			return
		}
		if hdr.Size > 0 {
			_, _ = tw.Write(data)
		}
		tw.Close()
		_ = w.ReadTar(tar.NewReader(&buf))
		_ = w.ReadTar(tar.NewReader(bytes.NewReader(data))) // raw bytes as an archive
		c.check(t)
	})
}

// metaArchive is an archive of one entry carrying metadata and a record
// of another namespace.
func metaArchive(f *testing.F, name string, typ byte) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{Name: name, Typeflag: typ, Mode: 0o644, Format: tar.FormatPAX, PAXRecords: map[string]string{
		"SCHILY.xattr.user.e2b.k": "v", "SCHILY.xattr.trusted.k": "v",
	}}
	if err := tw.WriteHeader(hdr); err != nil {
		f.Fatal(err)
	}
	tw.Close()
	return buf.Bytes()
}

// TestWriteTarSparse: a sparse file larger than the workspace (its data
// would be written in full) fails the archive with ErrTooLarge at once.
func TestWriteTarSparse(t *testing.T) {
	src, dst := newTestWorkspace(t, 1<<20), newTestWorkspace(t, 1<<20)
	fd, err := unix.Openat(src.fd, "sparse", unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Ftruncate(fd, 1<<40)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.CopyTo(dst); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("CopyTo with a 1 TiB sparse file: %v", err)
	}
}
