package main

import (
	"errors"
	"fmt"

	"github.com/nsbox/nsbox/agentapi/server"
	"github.com/nsbox/nsbox/rootfs"
)

// rootfsStore adapts rootfs.Store to server.RootfsStore.
type rootfsStore struct{ store rootfs.Store }

func (s rootfsStore) Acquire(name string) (string, func(), error) {
	if err := rootfs.ValidName(name); err != nil {
		return "", nil, &server.FieldError{Field: "rootfs", Msg: err.Error()}
	}
	r, err := s.store.Lookup(name)
	if errors.Is(err, rootfs.ErrNotFound) {
		return "", nil, fmt.Errorf("%w (%v)", server.ErrRootfsNotFound, err)
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

func (s rootfsStore) List() ([]string, error) {
	list, err := s.store.List()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list))
	for _, r := range list {
		names = append(names, r.Name)
	}
	return names, nil
}
