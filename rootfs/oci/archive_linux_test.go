package oci

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/nsbox/nsbox/rootfs"
)

// tarDir writes dir's files into a tar (gzip when gz) at out.
func tarDir(t *testing.T, dir, out string, gz bool) {
	t.Helper()
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var w io.Writer = f
	if gz {
		zw := gzip.NewWriter(f)
		defer zw.Close()
		w = zw
	}
	tw := tar.NewWriter(w)
	defer tw.Close()
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		h.Name, _ = filepath.Rel(dir, p)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			_, err = tw.Write(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The same image as an OCI layout (a directory, a tar, a tar.gz) and as
// docker save output: each is detected by its content and imported, with
// its manifest digest recorded; a tar of a root filesystem is none of them.
func TestImportArchives(t *testing.T) {
	requireRoot(t)
	img := image(t, "", layer(t, dir("etc/"), file("etc/hello", "hi"), file("etc/old", "old")), layer(t, file("etc/.wh.old", "")))
	digest, _ := img.Digest()
	work := t.TempDir()

	layoutDir := filepath.Join(work, "layout")
	p, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	ociTar, ociTgz := filepath.Join(work, "oci.tar"), filepath.Join(work, "oci.tar.gz")
	tarDir(t, layoutDir, ociTar, false)
	tarDir(t, layoutDir, ociTgz, true)
	dockerTar := filepath.Join(work, "docker.tar")
	tag, _ := name.NewTag("example.org/test/img:v1")
	if err := tarball.WriteToFile(dockerTar, tag, img); err != nil {
		t.Fatal(err)
	}
	rootfsTar := filepath.Join(work, "rootfs.tar")
	tarDir(t, filepath.Join(layoutDir, "blobs"), rootfsTar, false) // any tree without the layout's top-level files

	for _, tc := range []struct {
		path   string
		format Format
	}{{layoutDir, OCILayout}, {ociTar, OCILayout}, {ociTgz, OCILayout}, {dockerTar, DockerArchive}, {rootfsTar, NotImage}, {work, NotImage}} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			f, err := Detect(tc.path)
			if err != nil || f != tc.format {
				t.Fatalf("Detect = %q, %v; want %q", f, err, tc.format)
			}
			if f == NotImage {
				return
			}
			s := rootfs.Store{Root: t.TempDir()}
			r, _, err := Import(context.Background(), s, tc.path, Options{Name: "img"})
			if err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(r.Dir, "etc/hello")); string(b) != "hi" {
				t.Errorf("etc/hello = %q, %v", b, err)
			}
			if _, err := os.Lstat(filepath.Join(r.Dir, "etc/old")); err == nil {
				t.Error("etc/old survived its whiteout")
			}
			if r.Meta.Image == nil || r.Meta.Image.Digest != digest.String() || r.Meta.Image.Ref != tc.path {
				t.Errorf("image %+v, want digest %s", r.Meta.Image, digest)
			}
		})
	}
}

// An archive of several images for several platforms gives the one asked
// for, and says which it has when none fits.
func TestImportPicksPlatform(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	for _, arch := range []string{"arm64", "s390x"} {
		img := image(t, arch, layer(t, file("arch", arch)))
		if err := p.AppendImage(img, layout.WithPlatform(v1.Platform{OS: "linux", Architecture: arch})); err != nil {
			t.Fatal(err)
		}
	}
	s := rootfs.Store{Root: t.TempDir()}
	r, _, err := Import(context.Background(), s, dir, Options{Name: "img", Platform: "linux/s390x"})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(r.Dir, "arch")); string(b) != "s390x" || r.Meta.Image.Platform != "linux/s390x" {
		t.Errorf("took %q (%+v)", b, r.Meta.Image)
	}
	_, _, err = Import(context.Background(), s, dir, Options{Name: "img2", Platform: "linux/riscv64"})
	if err == nil || !strings.Contains(err.Error(), "linux/arm64, linux/s390x") {
		t.Errorf("err = %v, want the platforms listed", err)
	}
}

func TestInImageArchive(t *testing.T) {
	hex := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for n, want := range map[string]bool{"oci-layout": true, "index.json": true, "blobs": true, "manifest.json": true, "repositories": true,
		hex: true, hex + ".json": true, hex + ".tar.gz": true, "sha256:" + hex: true,
		"etc": false, "usr": false, ".dockerenv": false, hex[:63]: false, "0123456789ABCDEF" + hex[16:]: false} {
		if inImageArchive(n) != want {
			t.Errorf("inImageArchive(%q) = %v", n, !want)
		}
	}
}
