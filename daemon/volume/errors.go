package volume

import "errors"

// Sentinel errors, wrapped with the volume's name.
var (
	ErrInvalid  = errors.New("invalid volume request")
	ErrNotFound = errors.New("no such volume")
	ErrExists   = errors.New("the volume exists")
	ErrInUse    = errors.New("the volume is in use")
	// ErrNoSpace: the store cannot take the volume (MaxCount volumes, or
	// more than the disk under the store can still hold).
	ErrNoSpace = errors.New("no room for the volume")
	// ErrNoTools: the host lacks what volumes need (e2fsprogs, loop
	// devices); the wrapping error says which and how to get it.
	ErrNoTools = errors.New("named volumes are not available on this host")
)
