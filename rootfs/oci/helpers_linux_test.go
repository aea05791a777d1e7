package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/nsbox/nsbox/rootfs"
	"github.com/nsbox/nsbox/rootfs/importer"
)

// entry is one tar entry of a test layer.
type entry struct {
	name, link string
	typ        byte
	mode       int64
	body       string
}

func dir(n string) entry                { return entry{name: n, typ: tar.TypeDir, mode: 0o755} }
func file(n, body string) entry         { return entry{name: n, typ: tar.TypeReg, mode: 0o644, body: body} }
func symlink(n, target string) entry    { return entry{name: n, typ: tar.TypeSymlink, link: target} }
func exe(n, body string, m int64) entry { return entry{name: n, typ: tar.TypeReg, mode: m, body: body} }

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("requires root: layers keep their owners and the store chowns to root")
	}
}

// layer builds a gzip-compressed layer with real tar entries.
func layer(t *testing.T, es ...entry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, Size: int64(len(e.body)), Format: tar.FormatPAX}
		if e.typ == tar.TypeChar || e.typ == tar.TypeBlock {
			h.Devmajor, h.Devminor = 1, 3
		}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	raw := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// image stacks layers into an image for linux/arch ("" is this machine's).
func image(t *testing.T, arch string, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	if arch == "" {
		cf.Architecture = runtime.GOARCH
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// serve pushes img to an in-process registry on 127.0.0.1 and returns its
// reference there.
func serve(t *testing.T, img v1.Image) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/test/img:v1"
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	return ref
}

// pull pulls ref into a new store as "img".
func pull(t *testing.T, ref string) (rootfs.Store, *rootfs.Rootfs, *importer.Report, error) {
	t.Helper()
	s := rootfs.Store{Root: t.TempDir()}
	r, rep, err := Pull(context.Background(), s, ref, Options{Name: "img", Insecure: true})
	return s, r, rep, err
}

// assertEmptyStore fails when a failed pull left anything in the store.
func assertEmptyStore(t *testing.T, s rootfs.Store) {
	t.Helper()
	ents, err := os.ReadDir(s.Root)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left in the store: %s", e.Name())
	}
}
