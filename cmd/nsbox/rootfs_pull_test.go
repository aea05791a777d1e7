package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/nsbox/nsbox/rootfs/oci/ocitest"
)

// TestRootfsPullAndList: `nsbox rootfs pull` from a registry on loopback
// (--insecure), `rootfs import` of the same image saved as docker save
// does, and `rootfs list` showing both as argv-only (the image has no
// python3) with the image's digest.
func TestRootfsPullAndList(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("requires root: the store chowns its trees to root")
	}
	img := ocitest.Image(t, "amd64", ocitest.Layer(t, ocitest.Dir("bin/"), ocitest.Exe("bin/hello", "hi", 0o755)))
	digest, _ := img.Digest()
	ref := ocitest.Serve(t, "tools/hello:v1", img)
	r, _ := name.ParseReference(ref)
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
