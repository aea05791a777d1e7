package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nsbox/nsbox/rootfs"
	"github.com/nsbox/nsbox/rootfs/oci"
)

// The archive make image writes, built here by the same code, is an image
// `nsbox rootfs import` takes: its binaries and files in place, its
// manifest digest recorded, argv-only (it has no Python). The archive
// make image wrote is imported as well: NSBOX_TEST_IMAGE (make
// test-image sets it), else bin/nsbox-image.tar when it is there.
func TestImageImportsAsRootfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("requires root: the rootfs store chowns its trees to root")
	}
	bin := staticBinary(t)
	o := options{nsbox: bin, init: bin, name: "nsbox", version: "v1.2.3", source: "https://example.org/nsbox",
		created: time.Unix(1700000000, 0).UTC(), out: filepath.Join(t.TempDir(), "nsbox-image.tar")}
	digest, _, err := write(o)
	if err != nil {
		t.Fatal(err)
	}
	type archive struct{ name, path, digest string }
	archives := []archive{{"built here", o.out, digest.String()}}
	if p := os.Getenv("NSBOX_TEST_IMAGE"); p != "" {
		archives = append(archives, archive{"NSBOX_TEST_IMAGE", p, ""})
	} else if _, err := os.Stat("../../bin/nsbox-image.tar"); err == nil {
		archives = append(archives, archive{"bin/nsbox-image.tar", "../../bin/nsbox-image.tar", ""})
	} else {
		t.Log("no bin/nsbox-image.tar (make image writes it) and no NSBOX_TEST_IMAGE: only the archive built here is imported")
	}
	for _, a := range archives {
		path, digest := a.path, a.digest
		t.Run(a.name, func(t *testing.T) {
			if f, err := oci.Detect(path); f != oci.OCILayout {
				t.Fatalf("Detect(%s) = %q, %v; want an OCI layout", path, f, err)
			}
			s := rootfs.Store{Root: t.TempDir()}
			r, rep, err := oci.Import(context.Background(), s, path, oci.Options{Name: "nsbox-image", Platform: "linux/amd64"})
			if err != nil {
				t.Fatal(err)
			}
			if digest != "" {
				want, _ := os.ReadFile(bin)
				for _, p := range []string{"usr/local/bin/nsbox", "usr/local/bin/nsbox-init"} {
					got, err := os.ReadFile(filepath.Join(r.Dir, p))
					if err != nil || !bytes.Equal(got, want) {
						t.Errorf("%s: %d bytes, %v; want the %d-byte binary", p, len(got), err, len(want))
					}
				}
			}
			for _, p := range []string{"usr/local/bin/nsbox", "usr/local/bin/nsbox-init"} {
				if fi, err := os.Stat(filepath.Join(r.Dir, p)); err != nil || fi.Mode().Perm() != 0o755 {
					t.Errorf("%s: %v %v", p, fi, err)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(r.Dir, "etc/group")); !bytes.Contains(b, []byte("nsbox:x:10001:")) {
				t.Errorf("etc/group lacks the image's nsbox group:\n%s", b)
			}
			if fi, err := os.Stat(filepath.Join(r.Dir, "tmp")); err != nil || fi.Mode()&os.ModeSticky == 0 {
				t.Errorf("/tmp: %v %v, want the sticky bit the image gives it", fi, err)
			}
			m := r.Meta
			if m.Image == nil || (digest != "" && m.Image.Digest != digest) || m.Image.Layers != 1 || m.Image.Platform != "linux/amd64" {
				t.Errorf("image %+v, want digest %s, one layer, linux/amd64", m.Image, digest)
			}
			if !m.ArgvOnly || m.Python != "" || len(rep.StrippedSetid) != 0 {
				t.Errorf("argv-only %v, python %q, stripped %v; want argv-only, no python, nothing stripped", m.ArgvOnly, m.Python, rep.StrippedSetid)
			}
		})
	}
}
