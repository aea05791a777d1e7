package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/errdefs"

	"github.com/nsbox/nsbox/rootfs"
)

// Store adapts a rootfs.Store to RootfsStore.
type Store struct{ Store rootfs.Store }

// Acquire resolves name and holds the rootfs (a shared lock) until release.
func (s Store) Acquire(name string) (string, func(), error) {
	if err := rootfs.ValidName(name); err != nil {
		return "", nil, errdefs.Field("rootfs", "%v", err)
	}
	r, err := s.Store.Locate(name) // its tree and lock; not its metadata
	if errors.Is(err, rootfs.ErrNotFound) {
		return "", nil, fmt.Errorf("%w (%v)", ErrRootfsNotFound, err)
	}
	if err != nil {
		return "", nil, err
	}
	release, err := r.Acquire()
	if err != nil {
		return "", nil, fmt.Errorf("acquiring rootfs %q: %w", name, err)
	}
	return r.Dir, release, nil
}

// List names the complete rootfs trees of the store.
func (s Store) List() ([]string, error) {
	list, err := s.Store.List()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list))
	for _, r := range list {
		names = append(names, r.Name)
	}
	return names, nil
}

// Dir is the tree of the rootfs name (for what it has, not to run in it:
// Acquire holds it for that).
func (s Store) Dir(name string) (string, error) {
	r, err := s.Store.Locate(name)
	if err != nil {
		return "", err
	}
	return r.Dir, nil
}

// builtins lists the built-in languages beyond python and bash that
// rootfs has the programs for: javascript with node, typescript with node
// and esbuild. policy.Rules.Builtins.
func (d *Daemon) builtins(rootfs string) []string {
	ds, ok := d.cfg.Rootfs.(interface{ Dir(string) (string, error) })
	if !ok {
		return nil
	}
	dir, err := ds.Dir(rootfs)
	if err != nil || !hasFile(dir, "usr/bin/node") {
		return nil
	}
	out := []string{agentapi.LanguageJavaScript}
	if hasFile(dir, "usr/bin/esbuild") {
		out = append(out, agentapi.LanguageTypeScript)
	}
	return out
}

// hasFile reports whether rel exists in the tree at dir (a symlink counts;
// it is not followed).
func hasFile(dir, rel string) bool {
	_, err := os.Lstat(filepath.Join(dir, rel))
	return err == nil
}
