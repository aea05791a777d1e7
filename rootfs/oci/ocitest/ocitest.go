// Package ocitest builds OCI images for tests: layers of real tar
// entries, an image of them for a platform, and an in-process registry
// (go-containerregistry's pkg/registry) on 127.0.0.1 that serves it.
package ocitest

import (
	"archive/tar"
	"bytes"
	"io"
	"log"
	"net/http/httptest"
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
)

// Entry is one tar entry of a layer.
type Entry struct {
	Name, Link string
	Type       byte
	Mode       int64
	Body       string
}

// Dir is a directory entry, mode 755.
func Dir(n string) Entry { return Entry{Name: n, Type: tar.TypeDir, Mode: 0o755} }

// File is a regular file, mode 644.
func File(n, body string) Entry { return Entry{Name: n, Type: tar.TypeReg, Mode: 0o644, Body: body} }

// Symlink is a symbolic link to target.
func Symlink(n, target string) Entry { return Entry{Name: n, Type: tar.TypeSymlink, Link: target} }

// Exe is a regular file with mode m (set-id bits included).
func Exe(n, body string, m int64) Entry {
	return Entry{Name: n, Type: tar.TypeReg, Mode: m, Body: body}
}

// Layer builds a layer of es, in order (a device node is 1,3).
func Layer(t testing.TB, es ...Entry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := &tar.Header{Name: e.Name, Linkname: e.Link, Typeflag: e.Type, Mode: e.Mode, Format: tar.FormatPAX}
		if e.Type == tar.TypeReg {
			h.Size = int64(len(e.Body))
		}
		if e.Type == tar.TypeChar || e.Type == tar.TypeBlock {
			h.Devmajor, h.Devminor = 1, 3
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.Type == tar.TypeReg {
			if _, err := tw.Write([]byte(e.Body)); err != nil {
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

// Image stacks layers into an image for linux/arch ("" is this machine's).
func Image(t testing.TB, arch string, layers ...v1.Layer) v1.Image {
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

// Serve pushes img as repo ("test/img:v1") to a registry of its own on
// 127.0.0.1 (plain HTTP, closed at t's end) and returns its reference
// there.
func Serve(t testing.TB, repo string, img v1.Image) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/" + repo
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	return ref
}
