package rootfs

import "errors"

var (
	// ErrNotFound means the store has no complete rootfs of that name.
	ErrNotFound = errors.New("rootfs not found")
	// ErrExists means a rootfs of that name exists and Force was not set.
	ErrExists = errors.New("rootfs already exists (use --force to replace it)")
	// ErrInUse means a sandbox holds the rootfs (see Rootfs.Acquire).
	ErrInUse = errors.New("rootfs is in use by a sandbox")
	// ErrInvalidName means a rootfs name does not match [a-z0-9][a-z0-9._-]{0,62}.
	ErrInvalidName = errors.New("invalid rootfs name: use 1-63 of [a-z0-9._-], starting with a letter or digit")
	// ErrNoSpace means the store's filesystem ran out of space.
	ErrNoSpace = errors.New("no space left on device: free space under the store or use --store DIR")
)
