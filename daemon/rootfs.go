package daemon

import (
	"errors"
	"fmt"

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

// rootfsDir is policy.Rules.RootfsDir: the tree of a rootfs, where the
// language registry looks for what a language needs (daemon/lang).
func (d *Daemon) rootfsDir(name string) (string, error) {
	ds, ok := d.cfg.Rootfs.(interface{ Dir(string) (string, error) })
	if !ok {
		return "", errors.New("the rootfs store does not show its trees")
	}
	return ds.Dir(name)
}
