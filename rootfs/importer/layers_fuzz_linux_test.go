package importer

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// fuzzTar is a tar of entries (name, type, link) for FuzzLayersStayBeneath's seeds.
func fuzzTar(entries ...[3]string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e[0], Typeflag: e[1][0], Linkname: e[2], Mode: 0o755}
		if h.Typeflag == tar.TypeReg {
			h.Size = 1
		}
		tw.WriteHeader(h)
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte("x"))
		}
	}
	tw.Close()
	return buf.Bytes()
}

// FuzzLayersStayBeneath applies any layer over a tree whose lower layer
// planted links out of it (absolute, relative, to a file and a
// directory): whatever the layer says (entries, whiteouts, opaque
// directories, links), nothing outside the tree is written or removed.
//
//	go test -run '^$' -fuzz '^FuzzLayersStayBeneath$' -fuzztime 60s ./rootfs/importer/
func FuzzLayersStayBeneath(f *testing.F) {
	const reg, dir, sym, hard = "0", "5", "2", "1"
	for _, seed := range [][]byte{
		fuzzTar([3]string{"out/x", reg, ""}),
		fuzzTar([3]string{"rel/x", reg, ""}),
		fuzzTar([3]string{"out/.wh.canary", reg, ""}),
		fuzzTar([3]string{"rel/.wh..wh..opq", reg, ""}),
		fuzzTar([3]string{".wh...", reg, ""}),
		fuzzTar([3]string{"a/.wh...", reg, ""}),
		fuzzTar([3]string{"file/x", reg, ""}),
		fuzzTar([3]string{"lnk", hard, "file"}, [3]string{"lnk2", hard, "../outside/canary"}),
		fuzzTar([3]string{"d", dir, ""}, [3]string{"d/l", sym, "/"}, [3]string{"d/l/etc/x", reg, ""}),
		fuzzTar([3]string{"out", dir, ""}, [3]string{"out/x", reg, ""}),
		fuzzTar([3]string{"../outside/canary", reg, ""}),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, layer []byte) {
		base := t.TempDir()
		tree, outside := filepath.Join(base, "tree"), filepath.Join(base, "outside")
		for _, d := range []string{tree, outside} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(outside, "canary"), []byte("host"), 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := OpenLayers(tree, &Report{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		lower := fuzzTar([3]string{"file", reg, ""}, [3]string{"out", sym, outside}, [3]string{"rel", sym, "../outside"},
			[3]string{"can", sym, filepath.Join(outside, "canary")})
		if err := l.Apply(context.Background(), bytes.NewReader(lower)); err != nil {
			t.Fatal(err)
		}
		l.Apply(context.Background(), bytes.NewReader(layer))
		ents, err := os.ReadDir(outside)
		if err != nil || len(ents) != 1 || ents[0].Name() != "canary" {
			t.Fatalf("outside the tree: %v, %v", ents, err)
		}
		if b, err := os.ReadFile(filepath.Join(outside, "canary")); err != nil || string(b) != "host" {
			t.Fatalf("canary: %q, %v", b, err)
		}
		if ents, _ := os.ReadDir(base); len(ents) != 2 {
			t.Fatalf("beside the tree: %v", ents)
		}
	})
}
