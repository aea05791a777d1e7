package main

import (
	"archive/tar"
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestRootfsPullAndList: `nsbox rootfs pull` from a registry on loopback
// (--insecure), `rootfs import` of the same image saved as docker save
// does, and `rootfs list` showing both as argv-only (the image has no
// python3) with the image's digest.
func TestRootfsPullAndList(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("requires root: the store chowns its trees to root")
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755})
	tw.WriteHeader(&tar.Header{Name: "bin/hello", Typeflag: tar.TypeReg, Mode: 0o755, Size: 2})
	tw.Write([]byte("hi"))
	tw.Close()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{OS: "linux", Architecture: "amd64", RootFS: v1.RootFS{Type: "layers", DiffIDs: mustDiffIDs(t, img)}})
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := img.Digest()

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/tools/hello:v1"
	r, _ := name.ParseReference(ref)
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(t.TempDir(), "hello.tar")
	if err := tarball.WriteToFile(saved, r, img); err != nil {
		t.Fatal(err)
	}

	store := t.TempDir()
	args := []string{"rootfs", "pull", "--store", store, "--platform", "linux/amd64", ref}
	if _, stderr, code := runApp(t, "", args...); code == 0 || !strings.Contains(stderr, "--insecure") {
		t.Errorf("pull over http without --insecure: exit %d, %q", code, stderr)
	}
	if out, stderr, code := runApp(t, "", append(args, "--insecure")...); code != 0 || !strings.Contains(out, "rootfs hello-v1 ready") || !strings.Contains(stderr, "argv-only") {
		t.Fatalf("pull: exit %d\n%s\n%s", code, out, stderr)
	}
	if out, stderr, code := runApp(t, "", "rootfs", "import", "--store", store, "saved", saved); code != 0 || !strings.Contains(out, digest.String()) {
		t.Fatalf("import of a docker save archive: exit %d\n%s\n%s", code, out, stderr)
	}
	out, _, code := runApp(t, "", "rootfs", "list", "--store", store)
	short := digest.String()[:len("sha256:")+12]
	for _, n := range []string{"hello-v1", "saved"} {
		var line string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, n+" ") {
				line = l
			}
		}
		if code != 0 || !strings.Contains(line, " image ") || !strings.Contains(line, "argv-only") || !strings.HasSuffix(strings.TrimSpace(line), short) {
			t.Errorf("rootfs list: %s's line %q, want profile image, argv-only and %s:\n%s", n, line, short, out)
		}
	}
}

func mustDiffIDs(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return cf.RootFS.DiffIDs
}
