package oci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/nsbox/nsbox/rootfs"
	"github.com/nsbox/nsbox/rootfs/importer"
)

// Options says which image to take and where it goes.
type Options struct {
	Name  string // the rootfs's name in the store
	Force bool   // replace a rootfs of that name
	// Platform is the image's "linux/ARCH[/VARIANT]"; "" is this machine's.
	Platform string
	// Insecure allows plain http to a registry on loopback (a test's or a
	// local mirror's); nothing else is ever reached over http.
	Insecure bool
	// Progress (may be nil) hears each layer, then Store.Create's phases.
	Progress func(rootfs.Progress)
}

// Profile is the profile meta.json gives a rootfs made from an image.
const Profile = "image"

// Pull makes the rootfs o.Name from the image ref in its registry (Docker
// Hub by default), with the credentials docker login or podman login saved
// (anonymous otherwise). The Report lists the setuid/setgid bits stripped.
func Pull(ctx context.Context, s rootfs.Store, ref string, o Options) (*rootfs.Rootfs, *importer.Report, error) {
	want, err := parsePlatform(o.Platform)
	if err != nil {
		return nil, &importer.Report{}, err
	}
	r, err := parseRef(ref, o.Insecure)
	if err != nil {
		return nil, &importer.Report{}, err
	}
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithPlatform(want),
		remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithTransport(httpsOnly{next: remote.DefaultTransport, loopbackHTTP: o.Insecure}),
	}
	return install(ctx, s, o, want, ref, func(string) (v1.Image, error) {
		img, err := remote.Image(r, opts...)
		if err != nil {
			return nil, fmt.Errorf("pull %s: %w%s", r, err, registryHint(err, r.Context().RegistryStr()))
		}
		return img, nil
	})
}

// Import makes the rootfs o.Name from the image archive at path (Detect
// says which kind it is; a path of NotImage is an error: importer.Run
// takes those).
func Import(ctx context.Context, s rootfs.Store, path string, o Options) (*rootfs.Rootfs, *importer.Report, error) {
	want, err := parsePlatform(o.Platform)
	if err != nil {
		return nil, &importer.Report{}, err
	}
	f, err := Detect(path)
	if err != nil {
		return nil, &importer.Report{}, fmt.Errorf("import %s: %w", path, err)
	}
	if f == NotImage {
		return nil, &importer.Report{}, fmt.Errorf("%w: %s is neither an OCI image layout nor a docker save archive", ErrBadImage, path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &importer.Report{}, err
	}
	return install(ctx, s, o, want, abs, func(scratch string) (v1.Image, error) {
		return openArchive(path, f, want, scratch)
	})
}

// registryHint says what to do about a registry's refusal.
func registryHint(err error, registry string) string {
	var terr *transport.Error
	if !errors.As(err, &terr) {
		return ""
	}
	switch terr.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return "; log in with docker login " + registry + " or podman login " + registry + " (nsbox reads the credentials they save), or check the name"
	case http.StatusNotFound:
		return "; the registry has no such repository, tag or digest: check the reference"
	}
	return ""
}

// install makes the rootfs from the image open returns, through
// Store.Create: a failure anywhere leaves nothing in the store. open may
// use scratch, a directory beside the new tree that is removed after.
func install(ctx context.Context, s rootfs.Store, o Options, want v1.Platform, ref string, open func(scratch string) (v1.Image, error)) (*rootfs.Rootfs, *importer.Report, error) {
	rep := &importer.Report{}
	progress := o.Progress
	if progress == nil {
		progress = func(rootfs.Progress) {}
	}
	r, err := s.Create(ctx, o.Name, o.Force, progress, func(ctx context.Context, tree string) (rootfs.Meta, error) {
		m := rootfs.Meta{Profile: Profile}
		scratch := filepath.Join(filepath.Dir(tree), "image")
		defer os.RemoveAll(scratch)
		progress(rootfs.Progress{Phase: "manifest", Percent: -1, Message: ref})
		img, err := open(scratch)
		if err != nil {
			return m, err
		}
		info, layers, err := describe(img, want)
		if err != nil {
			return m, fmt.Errorf("%s: %w", ref, err)
		}
		info.Ref = ref
		l, err := importer.OpenLayers(tree, rep)
		if err != nil {
			return m, err
		}
		defer l.Close()
		for i, layer := range layers {
			d, _ := layer.Digest()
			size, _ := layer.Size()
			progress(rootfs.Progress{Phase: "layers", Percent: 100 * float64(i) / float64(len(layers)),
				Message: fmt.Sprintf("layer %d/%d %s (%s)", i+1, len(layers), short(d), rootfs.HumanSize(size))})
			if err := applyLayer(ctx, l, layer); err != nil {
				return m, layerError(ref, i, len(layers), d, err)
			}
		}
		progress(rootfs.Progress{Phase: "layers", Percent: 100, Message: fmt.Sprintf("%d layers applied", len(layers))})
		m.Image = info
		return m, nil
	})
	return r, rep, err
}

// describe reads what meta.json records of img and its layers.
func describe(img v1.Image, want v1.Platform) (*rootfs.Image, []v1.Layer, error) {
	digest, err := img.Digest()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: manifest: %w", ErrBadImage, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: config: %w", ErrBadImage, err)
	}
	config, err := img.ConfigName()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: config: %w", ErrBadImage, err)
	}
	plat, err := checkPlatform(cf, want)
	if err != nil {
		return nil, nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: layers: %w", ErrBadImage, err)
	}
	if len(layers) == 0 {
		return nil, nil, fmt.Errorf("%w: the image has no layers: there is no file to run", ErrBadImage)
	}
	return &rootfs.Image{Digest: digest.String(), Config: config.String(), Platform: plat, Layers: len(layers)}, layers, nil
}

// applyLayer writes one layer into the tree and checks its uncompressed
// content against its diff_id, which the config (and so the manifest's
// digest) pins.
func applyLayer(ctx context.Context, l *importer.Layers, layer v1.Layer) error {
	diffID, err := layer.DiffID()
	if err != nil {
		return fmt.Errorf("%w: diff_id: %w", ErrBadImage, err)
	}
	if diffID.Algorithm != "sha256" {
		return fmt.Errorf("%w: diff_id %s: only sha256 is checked", ErrBadImage, diffID)
	}
	rc, err := layer.Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	if err := l.Apply(ctx, io.TeeReader(rc, h)); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != diffID.Hex {
		return fmt.Errorf("%w: its content is sha256:%s, and the image's config says %s: the archive or the registry's copy is damaged; save or push the image again", ErrBadImage, got, diffID)
	}
	return nil
}

// layerError says which layer failed and, for a refused entry, what to do.
func layerError(ref string, i, n int, d v1.Hash, err error) error {
	err = fmt.Errorf("%s: layer %d of %d (%s): %w", ref, i+1, n, short(d), err)
	if errors.Is(err, importer.ErrRefused) {
		return fmt.Errorf("%w; nsbox takes no image with a \"..\" path, a device node, a fifo, a hard link out of the tree or a file written through a symlink: "+
			"rebuild the image without it, or `docker export` a container of it and `nsbox rootfs import NAME FILE.tar`, which skips such entries and lists them", err)
	}
	return err
}

func short(d v1.Hash) string {
	if len(d.Hex) < 12 {
		return d.String()
	}
	return d.Algorithm + ":" + d.Hex[:12]
}
