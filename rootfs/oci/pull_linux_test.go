package oci

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/nsbox/nsbox/rootfs"
	"github.com/nsbox/nsbox/rootfs/importer"
)

// A two-layer image from a registry on loopback: the second layer's
// whiteouts remove what the first wrote, its entries replace the first's
// (a file by a directory, a directory by a file), setuid bits are
// stripped, and meta.json records the image.
func TestPullAppliesLayers(t *testing.T) {
	requireRoot(t)
	img := image(t, "",
		layer(t,
			dir("etc/"), file("etc/os-release", "ID=test\n"),
			dir("usr/"), dir("usr/bin/"), exe("usr/bin/python3.11", "#!fake", 0o755), symlink("usr/bin/python3", "python3.11"),
			dir("usr/lib/"), dir("usr/lib/python3.11/"),
			dir("opt/"), dir("opt/old/"), file("opt/old/a.txt", "a"), dir("opt/old/sub/"), file("opt/old/sub/b.txt", "b"),
			dir("var/"), file("var/gone.txt", "gone"), file("var/keep.txt", "keep"),
			dir("srv/"), file("srv/x", "a file first"),
			dir("data/"), dir("data/d/"), file("data/d/f", "f"),
			dir("bin/"), exe("bin/tool", "#!tool", 0o4755),
			entry{Name: "usr/bin/py-link", Type: tar.TypeLink, Link: "usr/bin/python3.11"},
		),
		layer(t,
			file("var/.wh.gone.txt", ""),
			dir("opt/old/"), file("opt/old/.wh..wh..opq", ""), file("opt/old/new.txt", "new"),
			file("etc/os-release", "ID=test2\n"),
			dir("srv/x/"), file("srv/x/y", "y"),
			file("data/d", "a file now"),
			exe("bin/sgid", "#!sgid", 0o2755),
			file("nodir/.wh.x", ""),         // hides what no layer below has
			file("newdir/.wh..wh..opq", ""), // an opaque directory with no entry of its own
			file("var/keep.txt/.wh.x", ""),  // a whiteout under a file: nothing to hide
		),
	)
	ref := serve(t, img)
	_, r, rep, err := pull(t, ref)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"etc/os-release":     "ID=test2\n",
		"opt/old/new.txt":    "new",
		"var/keep.txt":       "keep",
		"srv/x/y":            "y",
		"data/d":             "a file now",
		"usr/bin/python3.11": "#!fake",
		"usr/bin/py-link":    "#!fake",
	}
	for p, want := range files {
		b, err := os.ReadFile(filepath.Join(r.Dir, p))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", p, b, err, want)
		}
	}
	for _, p := range []string{"var/gone.txt", "opt/old/a.txt", "opt/old/sub"} {
		if _, err := os.Lstat(filepath.Join(r.Dir, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v, want it removed by the second layer", p, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(r.Dir, "newdir")); err != nil || !fi.IsDir() {
		t.Errorf("newdir, opaque in the second layer: %v %v", fi, err)
	}
	if _, err := os.Lstat(filepath.Join(r.Dir, "nodir")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("nodir made for a whiteout: %v", err)
	}
	if l, _ := os.Readlink(filepath.Join(r.Dir, "usr/bin/python3")); l != "python3.11" {
		t.Errorf("usr/bin/python3 -> %q", l)
	}
	for p, want := range map[string]os.FileMode{"bin/tool": 0o755, "bin/sgid": 0o755, "usr/bin/python3.11": 0o755, "var/keep.txt": 0o644} {
		if fi, err := os.Stat(filepath.Join(r.Dir, p)); err != nil || fi.Mode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid) != want {
			t.Errorf("%s: mode %v, %v; want %v", p, fi.Mode(), err, want)
		}
	}
	if !slices.Equal(rep.StrippedSetid, []string{"bin/tool", "bin/sgid"}) {
		t.Errorf("stripped %v", rep.StrippedSetid)
	}
	digest, _ := img.Digest()
	config, _ := img.ConfigName()
	m := r.Meta
	if m.Profile != Profile || m.Image == nil || m.Image.Digest != digest.String() || m.Image.Config != config.String() || m.Image.Layers != 2 || m.Image.Ref != ref {
		t.Errorf("meta %+v image %+v; want digest %s config %s", m, m.Image, digest, config)
	}
	if m.Python != "3.11" || m.ArgvOnly {
		t.Errorf("python %q argv-only %v, want 3.11 and runnable", m.Python, m.ArgvOnly)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(r.Dir), "image")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("scratch left beside the tree: %v", err)
	}
	// The tree is a rootfs like any other: the sandbox user, the mount points.
	if _, err := os.Stat(filepath.Join(r.Dir, "workspace")); err != nil {
		t.Error(err)
	}
}

// The python3 the sandbox's PATH finds decides: a supported one is used,
// an old one or none makes the rootfs argv-only.
func TestPullPython(t *testing.T) {
	requireRoot(t)
	for _, tc := range []struct {
		name     string
		entries  []entry
		python   string
		argvOnly bool
	}{
		{"local 3.12", []entry{dir("usr/local/bin/"), exe("usr/local/bin/python3.12", "#!", 0o755), symlink("usr/local/bin/python3", "python3.12"), dir("usr/local/lib/python3.12/")}, "3.12", false},
		{"3.8 is too old", []entry{dir("usr/bin/"), exe("usr/bin/python3.8", "#!", 0o755), symlink("usr/bin/python3", "/usr/bin/python3.8")}, "3.8", true},
		{"none", []entry{dir("usr/lib/python3.11/"), file("usr/lib/python3.11/os.py", "")}, "", true},
		{"a dangling link", []entry{dir("usr/bin/"), symlink("usr/bin/python3", "python3.13")}, "", true},
		{"not executable", []entry{dir("usr/bin/"), file("usr/bin/python3", "")}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, r, _, err := pull(t, serve(t, image(t, "", layer(t, tc.entries...))))
			if err != nil {
				t.Fatal(err)
			}
			if r.Meta.Python != tc.python || r.Meta.ArgvOnly != tc.argvOnly {
				t.Errorf("python %q argv-only %v; want %q %v", r.Meta.Python, r.Meta.ArgvOnly, tc.python, tc.argvOnly)
			}
		})
	}
}

// refused pulls an image of layers and wants it refused whole, naming
// what and the fix, with nothing left in the store.
func refused(t *testing.T, what string, layers ...v1.Layer) {
	t.Helper()
	s, _, _, err := pull(t, serve(t, image(t, "", layers...)))
	if !errors.Is(err, importer.ErrRefused) {
		t.Fatalf("err = %v, want ErrRefused", err)
	}
	for _, want := range []string{what, "layer ", "docker export"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	t.Log(err)
	assertEmptyStore(t, s)
}

func TestPullRefusesDotDot(t *testing.T) {
	requireRoot(t)
	root := t.TempDir()
	t.Chdir(root) // a relative escape would land here
	refused(t, `".." component`, layer(t, dir("etc/"), file("etc/../../../../../../../escape.txt", "x")))
	if _, err := os.Stat(filepath.Join(root, "escape.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("escape.txt written: %v", err)
	}
	refused(t, "hard link target ../../../etc/passwd is outside the tree",
		layer(t, dir("etc/"), entry{Name: "etc/pw", Type: tar.TypeLink, Link: "../../../etc/passwd"}))
}

func TestPullRefusesDeviceNode(t *testing.T) {
	requireRoot(t)
	refused(t, "/dev/evil: device node", layer(t, dir("dev/"), entry{Name: "dev/evil", Type: tar.TypeChar, Mode: 0o666}))
	refused(t, "/dev/sda: device node", layer(t, dir("dev/"), entry{Name: "dev/sda", Type: tar.TypeBlock, Mode: 0o660}))
	refused(t, "/run/pipe: fifo", layer(t, dir("run/"), entry{Name: "run/pipe", Type: tar.TypeFifo, Mode: 0o600}))
}

// A symlink that points out of the tree, then a file written through it:
// in the next layer, and in the same one.
func TestPullRefusesWriteThroughSymlink(t *testing.T) {
	requireRoot(t)
	outside := t.TempDir()
	refused(t, "/etc/evil/planted: a parent directory is a symlink",
		layer(t, dir("etc/"), symlink("etc/evil", outside)),
		layer(t, file("etc/evil/planted", "pwned")))
	refused(t, "/etc/up/planted: a parent directory is a symlink",
		layer(t, dir("etc/"), symlink("etc/up", "../../../../../../../../.."+outside), file("etc/up/planted", "pwned")))
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("written outside the tree: %v", ents)
	}
}

// Set-id bits are stripped, not refused: the image is taken, its files
// without them, and the pull lists each.
func TestPullStripsSetid(t *testing.T) {
	requireRoot(t)
	_, r, rep, err := pull(t, serve(t, image(t, "", layer(t,
		dir("usr/"), dir("usr/bin/"), exe("usr/bin/su", "#!su", 0o4755), exe("usr/bin/wall", "#!wall", 0o2755),
		entry{Name: "usr/bin/both", Type: tar.TypeReg, Mode: 0o6711, Body: "#!both"},
		entry{Name: "var/", Type: tar.TypeDir, Mode: 0o755}, entry{Name: "var/mail/", Type: tar.TypeDir, Mode: 0o2775},
	))))
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{"usr/bin/su": 0o755, "usr/bin/wall": 0o755, "usr/bin/both": 0o711, "var/mail": os.ModeDir | 0o775} {
		fi, err := os.Lstat(filepath.Join(r.Dir, p))
		if err != nil || fi.Mode()&(os.ModeType|os.ModePerm|os.ModeSetuid|os.ModeSetgid) != want {
			t.Errorf("%s: %v, %v; want %v", p, fi.Mode(), err, want)
		}
	}
	if got := strings.Join(rep.StrippedSetid, " "); got != "usr/bin/su usr/bin/wall usr/bin/both var/mail" {
		t.Errorf("stripped %q", got)
	}
}

// A whiteout cannot name a parent directory: ".wh..." would otherwise
// remove the directory holding it, or more.
func TestPullRefusesWhiteoutOfParent(t *testing.T) {
	requireRoot(t)
	refused(t, "a whiteout of ..", layer(t, dir("etc/"), file("etc/a", "a")), layer(t, file("etc/.wh...", "")))
}

func TestPullRefusesPlainHTTPWithoutInsecure(t *testing.T) {
	requireRoot(t)
	ref := serve(t, image(t, "", layer(t, file("a", "a"))))
	s := rootfs.Store{Root: t.TempDir()}
	_, _, err := Pull(context.Background(), s, ref, Options{Name: "img"})
	if err == nil || !strings.Contains(err.Error(), "--insecure") {
		t.Fatalf("err = %v, want a refusal naming --insecure", err)
	}
	t.Log(err)
	assertEmptyStore(t, s)
	if _, err := parseRef("registry.example.com/img:v1", true); !errors.Is(err, ErrInsecure) {
		t.Errorf("--insecure off loopback: %v", err)
	}
}

// A reference the registry does not have says so.
func TestPullMissingTag(t *testing.T) {
	requireRoot(t)
	ref := serve(t, image(t, "", layer(t, file("a", "a"))))
	s, _, _, err := pull(t, strings.Replace(ref, ":v1", ":v2", 1))
	if err == nil || !strings.Contains(err.Error(), "no such repository, tag or digest") {
		t.Fatalf("err = %v, want the hint", err)
	}
	assertEmptyStore(t, s)
}

func TestPullRefusesOtherPlatform(t *testing.T) {
	requireRoot(t)
	s := rootfs.Store{Root: t.TempDir()}
	ref := serve(t, image(t, "s390x", layer(t, file("a", "a"))))
	_, _, err := Pull(context.Background(), s, ref, Options{Name: "img", Insecure: true, Platform: "linux/riscv64"})
	if !errors.Is(err, ErrPlatform) || !strings.Contains(err.Error(), "linux/s390x") {
		t.Fatalf("err = %v, want ErrPlatform naming the image's", err)
	}
	assertEmptyStore(t, s)
}

// A layer whose content is not what the config's diff_id says is refused.
func TestLayerDigestChecked(t *testing.T) {
	requireRoot(t)
	good := layer(t, file("a", "a"))
	other, _ := layer(t, file("b", "b")).DiffID()
	img := image(t, "", lyingLayer{good, other})
	s := rootfs.Store{Root: t.TempDir()}
	want, _ := parsePlatform("")
	_, _, err := install(context.Background(), s, Options{Name: "img"}, want, "test", func(string) (v1.Image, error) { return img, nil })
	if !errors.Is(err, ErrBadImage) || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("err = %v, want ErrBadImage", err)
	}
	assertEmptyStore(t, s)
}

type lyingLayer struct {
	v1.Layer
	diffID v1.Hash
}

func (l lyingLayer) DiffID() (v1.Hash, error) { return l.diffID, nil }

func TestLoopbackAndNames(t *testing.T) {
	for h, want := range map[string]bool{"127.0.0.1:5000": true, "localhost:5000": true, "[::1]:80": true, "127.8.0.1": true,
		"10.0.0.1:5000": false, "example.com": false, "localhost.example.com:5000": false} {
		if loopback(h) != want {
			t.Errorf("loopback(%q) = %v", h, !want)
		}
	}
	for ref, want := range map[string]string{"python:3.12-slim": "python-3.12-slim", "docker.io/library/debian": "debian",
		"ghcr.io/Org/Tool:V1+x": "tool-v1-x", "127.0.0.1:5000/a/b@sha256:" + strings.Repeat("a", 64): "b"} {
		if got := NameFor(ref); got != want || rootfs.ValidName(got) != nil {
			t.Errorf("NameFor(%q) = %q, want %q", ref, got, want)
		}
	}
}
