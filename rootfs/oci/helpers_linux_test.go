package oci

import (
	"context"
	"os"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/nsbox/nsbox/rootfs"
	"github.com/nsbox/nsbox/rootfs/importer"
	"github.com/nsbox/nsbox/rootfs/oci/ocitest"
)

// entry and the builders below are ocitest's, under the short names
// these tests spell their layers with.
type entry = ocitest.Entry

var (
	dir, file, symlink, exe = ocitest.Dir, ocitest.File, ocitest.Symlink, ocitest.Exe
	layer, image            = ocitest.Layer, ocitest.Image
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("requires root: layers keep their owners and the store chowns to root")
	}
}

// serve pushes img as test/img:v1 to a registry of its own and returns
// its reference there.
func serve(t *testing.T, img v1.Image) string {
	t.Helper()
	return ocitest.Serve(t, "test/img:v1", img)
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
