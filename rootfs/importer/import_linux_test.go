package importer

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nsbox/nsbox/rootfs"
)

type entry struct {
	name, link string
	typ        byte
	mode       int64
	body       string
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("requires root: imports keep the archive's owners and the store chowns to root")
	}
}

func writeTar(t *testing.T, entries []entry, gz bool) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
			if e.typ == tar.TypeDir {
				mode = 0o755
			}
		}
		hdr := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: mode, Size: int64(len(e.body)), Format: tar.FormatPAX}
		if e.typ == tar.TypeChar {
			hdr.Devmajor, hdr.Devminor = 1, 3
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	if gz {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(data)
		zw.Close()
		data = z.Bytes()
	}
	p := filepath.Join(t.TempDir(), "in.tar")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestImportTar(t *testing.T) {
	requireRoot(t)
	outside := t.TempDir() // an attacker's target outside the store
	os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o600)

	base := []entry{
		{name: "usr/bin/", typ: tar.TypeDir},
		{name: "usr/lib/python3.11/", typ: tar.TypeDir},
		{name: "usr/bin/python3.11", typ: tar.TypeReg, mode: 0o755, body: "#!fake"},
		{name: "usr/bin/python3", typ: tar.TypeSymlink, link: "python3.11"},
	}
	tests := []struct {
		name         string
		entries      []entry
		gz           bool
		wantRejected string // path of the single rejected entry, "" for none
		check        func(t *testing.T, tree string, rep *Report)
	}{
		{name: "dotdot", entries: []entry{{name: "../x", typ: tar.TypeReg, body: "x"}}, wantRejected: "../x"},
		{name: "dotdot inside", entries: []entry{{name: "a/../../x", typ: tar.TypeReg, body: "x"}}, wantRejected: "a/../../x"},
		{name: "absolute made relative", entries: []entry{{name: "/etc/x", typ: tar.TypeReg, body: "abs"}},
			check: func(t *testing.T, tree string, _ *Report) {
				if b, err := os.ReadFile(filepath.Join(tree, "etc/x")); string(b) != "abs" {
					t.Errorf("etc/x = %q, %v", b, err)
				}
			}},
		{name: "hardlink escaping", entries: []entry{{name: "h", typ: tar.TypeLink, link: "../../" + outside + "/secret"}}, wantRejected: "h"},
		{name: "hardlink through symlink", entries: []entry{
			{name: "evil", typ: tar.TypeSymlink, link: outside},
			{name: "h", typ: tar.TypeLink, link: "evil/secret"},
		}, wantRejected: "h"},
		{name: "write through absolute symlink", entries: []entry{
			{name: "evil", typ: tar.TypeSymlink, link: outside},
			{name: "evil/passwd", typ: tar.TypeReg, body: "pwned"},
		}, wantRejected: "evil/passwd"},
		{name: "write through relative symlink", entries: []entry{
			{name: "d/evil", typ: tar.TypeSymlink, link: "../../../../../../../../../../" + outside},
			{name: "d/evil/passwd", typ: tar.TypeReg, body: "pwned"},
		}, wantRejected: "d/evil/passwd"},
		{name: "mkdir through symlink", entries: []entry{
			{name: "evil", typ: tar.TypeSymlink, link: outside},
			{name: "evil/sub/", typ: tar.TypeDir},
		}, wantRejected: "evil/sub"},
		{name: "char device", entries: []entry{{name: "dev/null", typ: tar.TypeChar}}, wantRejected: "dev/null"},
		{name: "fifo", entries: []entry{{name: "f", typ: tar.TypeFifo}}, wantRejected: "f"},
		{name: "setuid stripped", entries: []entry{{name: "bin/su", typ: tar.TypeReg, mode: 0o4755, body: "su"}, {name: "g/", typ: tar.TypeDir, mode: 0o2775}},
			check: func(t *testing.T, tree string, rep *Report) {
				if strings.Join(rep.StrippedSetid, ",") != "bin/su,g" {
					t.Errorf("StrippedSetid = %v", rep.StrippedSetid)
				}
				for p, want := range map[string]os.FileMode{"bin/su": 0o755, "g": 0o775 | os.ModeDir} {
					if fi, err := os.Stat(filepath.Join(tree, p)); err != nil || fi.Mode() != want {
						t.Errorf("%s mode = %v, want %v", p, fi.Mode(), want)
					}
				}
			}},
		{name: "later entry replaces symlink, not its target", gz: true, entries: []entry{
			{name: "evil", typ: tar.TypeSymlink, link: outside + "/secret"},
			{name: "evil", typ: tar.TypeReg, body: "file"},
		}, check: func(t *testing.T, tree string, _ *Report) {
			if fi, err := os.Lstat(filepath.Join(tree, "evil")); err != nil || !fi.Mode().IsRegular() {
				t.Errorf("evil: %v %v", fi, err)
			}
		}},
		{name: "good hardlink and symlinks kept", entries: []entry{
			{name: "etc/a", typ: tar.TypeReg, body: "a"},
			{name: "etc/b", typ: tar.TypeLink, link: "etc/a"},
			{name: "etc/abs", typ: tar.TypeSymlink, link: "/etc/a"},
		}, check: func(t *testing.T, tree string, _ *Report) {
			a, _ := os.Stat(filepath.Join(tree, "etc/a"))
			b, _ := os.Stat(filepath.Join(tree, "etc/b"))
			if a == nil || b == nil || !os.SameFile(a, b) {
				t.Errorf("etc/b is not a hard link of etc/a")
			}
			if l, err := os.Readlink(filepath.Join(tree, "etc/abs")); l != "/etc/a" {
				t.Errorf("etc/abs -> %q, %v", l, err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := rootfs.Store{Root: filepath.Join(t.TempDir(), "a", "b", "store")}
			src := writeTar(t, append(append([]entry{}, base...), tc.entries...), tc.gz)
			r, rep, err := Run(context.Background(), s, "imp", src, false)
			if err != nil {
				t.Fatalf("Import: %v (report %+v)", err, rep)
			}
			var rejected []string
			for _, rj := range rep.Rejected {
				rejected = append(rejected, rj.Path)
			}
			if want := tc.wantRejected; (want == "" && len(rejected) != 0) || (want != "" && strings.Join(rejected, ",") != want) {
				t.Errorf("rejected %+v, want %q", rep.Rejected, want)
			}
			if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "host secret" {
				t.Fatalf("outside secret changed: %q", b)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 1 {
				t.Fatalf("outside dir gained entries: %v", ents)
			}
			for _, p := range []string{"x", "../x", "../../x"} {
				if _, err := os.Lstat(filepath.Join(s.Root, p)); err == nil {
					t.Errorf("%s written outside the tree", p)
				}
			}
			if r.Meta.Profile != "imported" || r.Meta.Python != "3.11" {
				t.Errorf("meta = %+v", r.Meta)
			}
			if len(rep.Warnings) != 0 {
				t.Errorf("warnings: %v", rep.Warnings)
			}
			if tc.check != nil {
				tc.check(t, r.Dir, rep)
			}
		})
	}
}

func TestImportDir(t *testing.T) {
	requireRoot(t)
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "etc"), 0o755)
	os.WriteFile(filepath.Join(src, "etc/a"), []byte("a"), 0o640)
	os.Link(filepath.Join(src, "etc/a"), filepath.Join(src, "etc/b"))
	os.Symlink("/nowhere", filepath.Join(src, "etc/dangling"))
	if err := syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := rootfs.Store{Root: t.TempDir()}
	r, rep, err := Run(context.Background(), s, "dir", src, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rejected) != 1 || rep.Rejected[0].Path != "fifo" {
		t.Errorf("rejected = %+v, want the fifo", rep.Rejected)
	}
	if len(rep.Warnings) != 1 {
		t.Errorf("warnings = %v, want one about python3", rep.Warnings)
	}
	a, _ := os.Stat(filepath.Join(r.Dir, "etc/a"))
	b, _ := os.Stat(filepath.Join(r.Dir, "etc/b"))
	if a == nil || b == nil || !os.SameFile(a, b) || a.Mode() != 0o640 {
		t.Errorf("etc/a, etc/b: %v %v", a, b)
	}
	if l, _ := os.Readlink(filepath.Join(r.Dir, "etc/dangling")); l != "/nowhere" {
		t.Errorf("dangling symlink -> %q", l)
	}
	if _, err := os.Stat(filepath.Join(r.Dir, "workspace")); err != nil {
		t.Error(err)
	}
	// The same source gives the same digest.
	r2, _, err := Run(context.Background(), s, "dir2", src, false)
	if err != nil || r2.Meta.Digest != r.Meta.Digest {
		t.Errorf("digest %s vs %s, %v", r2.Meta.Digest, r.Meta.Digest, err)
	}
}

func TestImportBadSource(t *testing.T) {
	requireRoot(t)
	p := filepath.Join(t.TempDir(), "junk")
	os.WriteFile(p, bytes.Repeat([]byte("not a tar "), 100), 0o644)
	s := rootfs.Store{Root: t.TempDir()}
	if _, _, err := Run(context.Background(), s, "x", p, false); !errors.Is(err, ErrBadSource) {
		t.Fatalf("err = %v, want ErrBadSource", err)
	}
	if ents, _ := os.ReadDir(s.Root); len(ents) != 0 {
		t.Errorf("leftovers %v", ents)
	}
}
