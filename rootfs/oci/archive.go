package oci

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Format is the kind of image archive a path holds.
type Format string

const (
	// NotImage is any other file or directory: a plain rootfs tarball or tree.
	NotImage Format = ""
	// OCILayout is an OCI image layout (oci-layout, index.json, blobs/),
	// in a tar (`skopeo copy ... oci-archive:`, `make image`) or a directory.
	OCILayout Format = "oci-layout"
	// DockerArchive is `docker save` or `podman save` output: a tar with
	// a manifest.json listing each image's config and layers.
	DockerArchive Format = "docker-archive"
)

// Detect says which kind of image archive path is, by its content: the
// top-level names of a tar (plain or gzip), or of a directory. Anything
// else, a tar of a root filesystem included, is NotImage.
func Detect(path string) (Format, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return NotImage, err
	}
	top := map[string]bool{}
	if fi.IsDir() {
		for _, n := range []string{"oci-layout", "index.json", "manifest.json"} {
			if st, err := os.Stat(filepath.Join(path, n)); err == nil && st.Mode().IsRegular() {
				top[n] = true
			}
		}
	} else {
		rc, err := openMaybeGzip(path)
		if err != nil {
			return NotImage, err
		}
		defer rc.Close()
		tr := tar.NewReader(rc)
		for {
			hdr, err := tr.Next()
			if err != nil {
				break // the end, or not a tar: the importer says which
			}
			n := strings.TrimPrefix(hdr.Name, "./")
			if n == "." {
				continue
			}
			first, _, nested := strings.Cut(n, "/")
			if first != "" && !inImageArchive(first) {
				return NotImage, nil // a tree's top directory (etc, usr): stop reading
			}
			if hdr.Typeflag == tar.TypeReg && !nested {
				top[n] = true
			}
		}
	}
	switch {
	case top["manifest.json"] && !fi.IsDir():
		return DockerArchive, nil // docker 25's save writes a layout too; its manifest.json reads without unpacking
	case top["oci-layout"] && top["index.json"]:
		return OCILayout, nil
	}
	return NotImage, nil
}

// inImageArchive reports a top-level name an image archive may hold: the
// OCI layout's, and docker save's (manifest.json, repositories, layers and
// configs named by their digests: HEX/, HEX.json, HEX.tar.gz,
// sha256:HEX).
func inImageArchive(name string) bool {
	switch name {
	case "oci-layout", "index.json", "blobs", "manifest.json", "repositories":
		return true
	}
	hex, _, _ := strings.Cut(strings.TrimPrefix(name, "sha256:"), ".") // .json, .tar, .tar.gz
	if len(hex) != 64 {
		return false
	}
	for _, c := range hex {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// openMaybeGzip opens a file, decompressing it when it starts with gzip's
// magic bytes.
func openMaybeGzip(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReader(f)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return struct {
			io.Reader
			io.Closer
		}{gz, f}, nil
	}
	return struct {
		io.Reader
		io.Closer
	}{br, f}, nil
}

// openArchive reads the image in the archive at path of format f for
// platform want. An OCI layout in a tar is unpacked into scratch first (a
// directory that the caller removes).
func openArchive(path string, f Format, want v1.Platform, scratch string) (v1.Image, error) {
	switch f {
	case DockerArchive:
		img, err := tarball.Image(func() (io.ReadCloser, error) { return openMaybeGzip(path) }, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: %s (docker save archive): %w; save one image per archive (docker save NAME:TAG -o FILE)", ErrBadImage, path, err)
		}
		return img, nil
	case OCILayout:
		dir := path
		if fi, err := os.Stat(path); err != nil {
			return nil, err
		} else if !fi.IsDir() {
			if err := unpackLayout(path, scratch); err != nil {
				return nil, err
			}
			dir = scratch
		}
		idx, err := layout.ImageIndexFromPath(dir)
		if err != nil {
			return nil, fmt.Errorf("%w: %s (OCI layout): %w", ErrBadImage, path, err)
		}
		return fromIndex(idx, want)
	}
	return nil, fmt.Errorf("%w: %s is not an image archive", ErrBadImage, path)
}

// unpackLayout writes an OCI layout archive's oci-layout, index.json and
// blobs into dir: regular files and directories only, names without ".."
// (dir is new and gets no symlink, so nothing lands outside it).
func unpackLayout(path, dir string) error {
	rc, err := openMaybeGzip(path)
	if err != nil {
		return err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrBadImage, path, err)
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		if name != "oci-layout" && name != "index.json" && !strings.HasPrefix(name, "blobs/") {
			continue
		}
		clean := filepath.Clean(name)
		if clean != strings.TrimSuffix(name, "/") || strings.HasPrefix(clean, "..") || filepath.IsAbs(clean) {
			return fmt.Errorf("%w: %s: entry %q is not a plain name in the layout", ErrBadImage, path, hdr.Name)
		}
		dst := filepath.Join(dir, clean)
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(dst, 0o700)
		case tar.TypeReg:
			err = writeBlob(dst, tr)
		default:
			err = fmt.Errorf("%w: %s: entry %q is not a file or directory", ErrBadImage, path, hdr.Name)
		}
		if err != nil {
			return err
		}
	}
}

func writeBlob(dst string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%w: %s is in the archive twice", ErrBadImage, filepath.Base(dst))
	}
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
