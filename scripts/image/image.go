package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

type options struct {
	nsbox, init, out                string
	name, version, revision, source string
	created                         time.Time
}

// SocketGID is the image's nsbox group: the daemon gives its socket to it
// (mode 0660), so a pod whose supplementalGroups hold it may connect.
const SocketGID = 10001

// entry is one file or directory of the image's one layer.
type entry struct {
	path string
	mode int64
	data []byte
	dir  bool
}

// entries lists the layer: the binaries, the users and groups, and the
// directories the daemon uses (all mount points in a pod).
func entries(o options) ([]entry, error) {
	var out []entry
	for _, d := range []string{"etc", "etc/nsbox", "run", "run/nsbox", "usr", "usr/local", "usr/local/bin", "var", "var/lib", "var/lib/nsbox", "var/lib/nsbox/rootfs"} {
		out = append(out, entry{path: d, mode: 0o755, dir: true})
	}
	out = append(out, entry{path: "tmp", mode: 0o1777, dir: true})
	out = append(out,
		entry{path: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\n")},
		entry{path: "etc/group", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:\nnsbox:x:%d:\n", SocketGID)},
	)
	for _, b := range []struct{ src, dst string }{{o.nsbox, "usr/local/bin/nsbox"}, {o.init, "usr/local/bin/nsbox-init"}} {
		data, err := os.ReadFile(b.src)
		if err != nil {
			return nil, fmt.Errorf("%w (run make build first)", err)
		}
		if !isStaticELF(data) {
			return nil, fmt.Errorf("%s is not a static ELF executable: the image has no libc (build it with make build)", b.src)
		}
		out = append(out, entry{path: b.dst, mode: 0o755, data: data})
	}
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.path, b.path) })
	return out, nil
}

// isStaticELF reports an ELF executable with no PT_INTERP program header
// (no dynamic loader to find in the image).
func isStaticELF(b []byte) bool {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return false
	}
	defer f.Close()
	return !slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
}

// layerTar writes entries as a tar whose every header is fixed by the
// inputs: owner root, times from created, no user or group names.
func layerTar(es []entry, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := &tar.Header{Name: e.path, Mode: e.mode, ModTime: created, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(e.data))}
		if e.dir {
			h.Name, h.Typeflag, h.Size = e.path+"/", tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// build makes the image.
func build(o options) (v1.Image, error) {
	es, err := entries(o)
	if err != nil {
		return nil, err
	}
	raw, err := layerTar(es, o.created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: o.created}, CreatedBy: "scripts/image: nsbox, nsbox-init, /etc/passwd, /etc/group", Comment: "nsbox " + o.version,
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Created = v1.Time{Time: o.created}
	cf.Config = v1.Config{
		Entrypoint: []string{"/usr/local/bin/nsbox"},
		Cmd:        []string{"daemon"},
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		WorkingDir: "/",
		StopSignal: "SIGTERM",
		Labels:     labels(o),
	}
	return mutate.ConfigFile(img, cf)
}

// labels are the OCI annotations the image carries as labels.
func labels(o options) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "nsbox",
		"org.opencontainers.image.description": "nsbox daemon: Linux-native sandboxes for agent-written code (run privileged; see docs/OPERATIONS.md)",
		"org.opencontainers.image.version":     o.version,
		"org.opencontainers.image.source":      o.source,
		"org.opencontainers.image.created":     o.created.Format(time.RFC3339),
	}
	if o.revision != "" {
		l["org.opencontainers.image.revision"] = o.revision
	}
	return l
}

// write builds the image and writes it as an OCI archive (an OCI image
// layout in a tar, its headers fixed like the layer's) and returns the
// manifest's digest and the archive's size.
func write(o options) (v1.Hash, int64, error) {
	img, err := build(o)
	if err != nil {
		return v1.Hash{}, 0, err
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, 0, err
	}
	dir, err := os.MkdirTemp("", "nsbox-image-")
	if err != nil {
		return v1.Hash{}, 0, err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, 0, err
	}
	ref := o.name + ":" + o.version
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		// The tag (OCI), and the full name containerd's import reads.
		"org.opencontainers.image.ref.name": o.version,
		"io.containerd.image.name":          "docker.io/library/" + ref,
	})); err != nil {
		return v1.Hash{}, 0, err
	}
	size, err := tarDir(dir, o.out, o.created)
	return digest, size, err
}

// tarDir writes dir's files into the tar out, sorted, with fixed headers,
// through a temporary file renamed into place.
func tarDir(dir, out string, created time.Time) (int64, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && path != dir {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	slices.Sort(files)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return 0, err
	}
	f, err := os.CreateTemp(filepath.Dir(out), ".nsbox-image-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, path := range files {
		st, err := os.Lstat(path)
		if err != nil {
			return 0, err
		}
		rel, _ := filepath.Rel(dir, path)
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: created, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: st.Size()}
		if st.IsDir() {
			h.Name, h.Mode, h.Typeflag, h.Size = h.Name+"/", 0o755, tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return 0, err
		}
		if !st.IsDir() {
			b, err := os.ReadFile(path)
			if err != nil {
				return 0, err
			}
			if _, err := tw.Write(b); err != nil {
				return 0, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	if err := f.Chmod(0o644); err != nil {
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	return st.Size(), os.Rename(f.Name(), out)
}
