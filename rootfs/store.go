package rootfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// Store is a directory of rootfs trees. The zero value uses DefaultStoreRoot.
type Store struct {
	Root string
}

func (s Store) root() string {
	if s.Root == "" {
		return DefaultStoreRoot
	}
	return s.Root
}

func (s Store) entryDir(name string) string { return filepath.Join(s.root(), name) }

// Lookup returns the complete rootfs called name.
func (s Store) Lookup(name string) (*Rootfs, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	r, err := s.load(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("rootfs %q in %s: %w: run: nsbox rootfs build --profile datasci --name %s (or --profile minimal: python3 only)", name, s.root(), ErrNotFound, name)
	}
	return r, err
}

// Locate returns the complete rootfs called name as Lookup does, but
// without reading its metadata (Meta is zero): for a caller that needs the
// tree and its lock only, on a run's path (meta.json lists every package:
// parsing it costs ~0.3 ms).
func (s Store) Locate(name string) (*Rootfs, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	dir := s.entryDir(name)
	if _, err := os.Stat(filepath.Join(dir, metaFile)); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("rootfs %q in %s: %w: run: nsbox rootfs build --profile datasci --name %s (or --profile minimal: python3 only)", name, s.root(), ErrNotFound, name)
	} else if err != nil {
		return nil, err
	}
	return &Rootfs{Name: name, Dir: filepath.Join(dir, "rootfs"), lockPath: filepath.Join(dir, lockFile)}, nil
}

func (s Store) load(name string) (*Rootfs, error) {
	dir := s.entryDir(name)
	m, err := readMeta(dir)
	if err != nil {
		return nil, err
	}
	return &Rootfs{
		Name:     name,
		Dir:      filepath.Join(dir, "rootfs"),
		Meta:     m,
		lockPath: filepath.Join(dir, lockFile),
	}, nil
}

// List returns the complete rootfs trees in the store, sorted by name. Builds
// in progress, interrupted builds and parked old trees are never listed.
func (s Store) List() ([]Rootfs, error) {
	ents, err := os.ReadDir(s.root())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list rootfs store: %w", err)
	}
	var out []Rootfs
	for _, e := range ents {
		if !e.IsDir() || ValidName(e.Name()) != nil {
			continue
		}
		r, err := s.load(e.Name())
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
