package rootfs

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
	Profile   string    `json:"profile"` // "minimal", "datasci" or "imported"
	Suite     string    `json:"suite,omitempty"`
	Mirror    string    `json:"mirror,omitempty"`
	Python    string    `json:"python"` // e.g. "3.11.2"; empty when the tree has none
	Packages  []Package `json:"packages"`
	Created   time.Time `json:"created"`
	SizeBytes int64     `json:"size_bytes"`
	Digest    string    `json:"digest"` // "sha256:..." over the tree's file list and contents
}

// Package is one installed Debian package.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
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
