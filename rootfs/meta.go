package rootfs

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Rootfs is one complete tree in a store.
type Rootfs struct {
	Name string
	Dir  string // <Root>/<name>/rootfs: the tree itself
	Meta Meta

	lockPath string
}

// Meta describes a rootfs; it is stored as meta.json beside the tree.
type Meta struct {
	Name      string    `json:"name"`
	Profile   string    `json:"profile"` // "minimal", "datasci", "imported" or "image"
	Suite     string    `json:"suite,omitempty"`
	Mirror    string    `json:"mirror,omitempty"`
	Python    string    `json:"python"` // e.g. "3.11.2"; empty when the tree has none
	Packages  []Package `json:"packages"`
	Created   time.Time `json:"created"`
	SizeBytes int64     `json:"size_bytes"`
	Digest    string    `json:"digest"` // "sha256:..." over the tree's file list and contents
	// Trim says what a build left out or removed; nil for imports.
	Trim *Trim `json:"trim,omitempty"`
	// ArgvOnly says the sandbox's PATH finds no python3 in the tree, or one
	// older than MinPython: runs on it are commands (argv), never Python
	// code through the runner.
	ArgvOnly bool `json:"argv_only,omitempty"`
	// Image is the OCI image the tree was made from (rootfs/oci); nil
	// for builds and plain imports.
	Image *Image `json:"image,omitempty"`
}

// Trim records what a build left out of the tree, so a missing file can be
// told from a broken package: Packages lists only what is still installed.
type Trim struct {
	Purged         []string `json:"purged,omitempty"`          // packages removed with dpkg --purge --force-depends
	Excluded       []string `json:"excluded,omitempty"`        // dpkg path-exclude globs: never unpacked
	Included       []string `json:"included,omitempty"`        // dpkg path-include globs that override Excluded
	Removed        []string `json:"removed,omitempty"`         // paths deleted after the install (tests dirs, caches)
	StrippedSetid  []string `json:"stripped_setid,omitempty"`  // files whose setuid/setgid bits were cleared
	RemovedDevices []string `json:"removed_devices,omitempty"` // device nodes, fifos and sockets deleted
	BytesBefore    int64    `json:"bytes_before"`              // tree size before purge and removal
	FontCache      string   `json:"font_cache,omitempty"`      // prebuilt matplotlib font cache dir in the tree
}

// Image names the OCI image a rootfs was made from.
type Image struct {
	// Ref is what it was pulled as (a registry reference) or imported
	// from (the archive's path).
	Ref string `json:"ref"`
	// Digest is the image manifest's digest ("sha256:..."): the registry
	// serves that image under REPO@DIGEST.
	Digest string `json:"digest"`
	// Config is the config blob's digest: the image ID docker and podman
	// show.
	Config string `json:"config"`
	// Platform is the image's OS and architecture ("linux/amd64").
	Platform string `json:"platform"`
	// Layers is the number of layers applied.
	Layers int `json:"layers"`
}

// Package is one installed Debian package.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Version returns the upstream version of the installed Debian package pkg
// ("18.20.4" for nodejs 18.20.4+dfsg-1~deb12u2), or "" when the tree does
// not have it.
func (m Meta) Version(pkg string) string {
	for _, p := range m.Packages {
		if p.Name == pkg {
			return upstreamVersion(p.Version)
		}
	}
	return ""
}

// upstreamVersion strips a Debian version of its epoch ("1:"), its
// revision ("-1~deb12u2", after the last "-") and a repack suffix ("+dfsg",
// "+ds+~cs25.17.7"): what the program itself reports as its version.
func upstreamVersion(v string) string {
	if i := strings.IndexByte(v, ':'); i >= 0 {
		v = v[i+1:]
	}
	if i := strings.LastIndexByte(v, '-'); i >= 0 {
		v = v[:i]
	}
	v, _, _ = strings.Cut(v, "+")
	return v
}

const metaFile = "meta.json"

func readMeta(entryDir string) (Meta, error) {
	var m Meta
	b, err := os.ReadFile(filepath.Join(entryDir, metaFile))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s: %w", filepath.Join(entryDir, metaFile), err)
	}
	return m, nil
}

func writeMeta(entryDir string, m Meta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(entryDir, metaFile), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
