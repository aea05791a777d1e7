package oci

import (
	"fmt"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// parsePlatform reads "linux/amd64" or "linux/arm64/v8"; "" is linux and
// this machine's architecture.
func parsePlatform(s string) (v1.Platform, error) {
	if s == "" {
		return v1.Platform{OS: "linux", Architecture: runtime.GOARCH}, nil
	}
	p, err := v1.ParsePlatform(s)
	if err != nil || p.OS != "linux" || p.Architecture == "" {
		return v1.Platform{}, fmt.Errorf("--platform %q: give linux/ARCH[/VARIANT], e.g. linux/amd64 (sandboxes are Linux processes)", s)
	}
	return *p, nil
}

func platformString(p v1.Platform) string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// fromIndex takes the one image of idx for want: the only image it lists,
// or the one whose platform satisfies want (looking into nested indexes).
func fromIndex(idx v1.ImageIndex, want v1.Platform) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("%w: index: %w", ErrBadImage, err)
	}
	var plain []v1.Descriptor // images with no platform in the index
	var seen []string
	for _, d := range im.Manifests {
		switch {
		case d.MediaType.IsIndex():
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, fmt.Errorf("%w: index %s: %w", ErrBadImage, d.Digest, err)
			}
			if img, err := fromIndex(child, want); err == nil {
				return img, nil
			}
		case d.MediaType.IsImage():
			if d.Platform == nil {
				plain = append(plain, d)
				continue
			}
			if d.Platform.Satisfies(want) {
				return idx.Image(d.Digest)
			}
			seen = append(seen, platformString(*d.Platform))
		}
	}
	switch len(plain) {
	case 1:
		return idx.Image(plain[0].Digest)
	case 0:
		return nil, fmt.Errorf("%w %s: the image has %s; give --platform with one of them (this machine runs linux/%s)",
			ErrPlatform, platformString(want), orNone(seen), runtime.GOARCH)
	}
	return nil, fmt.Errorf("%w: the archive holds %d images; save or copy one image per archive", ErrBadImage, len(plain))
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// checkPlatform refuses an image whose config names another platform
// than want (an image pulled by digest, or a single-image archive).
func checkPlatform(cf *v1.ConfigFile, want v1.Platform) (string, error) {
	if cf.OS == "" && cf.Architecture == "" {
		return platformString(want), nil
	}
	have := cf.Platform()
	if have == nil || !have.Satisfies(v1.Platform{OS: want.OS, Architecture: want.Architecture}) {
		got := cf.OS + "/" + cf.Architecture
		return "", fmt.Errorf("%w %s: the image is %s; give --platform %s if this machine runs it, or take the image's %s variant",
			ErrPlatform, platformString(want), got, got, platformString(want))
	}
	return platformString(*have), nil
}
