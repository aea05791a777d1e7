package rootfs

import "fmt"

// DefaultStoreRoot is where rootfs trees live unless Store.Root says otherwise.
const DefaultStoreRoot = "/var/lib/nsbox/rootfs"

// DefaultName is the rootfs `nsbox exec` uses when none is named.
const DefaultName = "default"

// ValidName reports whether name can name a rootfs: [a-z0-9][a-z0-9._-]{0,62}.
// Names starting with '.' are reserved for the store's own temporary entries.
func ValidName(name string) error {
	if len(name) == 0 || len(name) > 63 {
		return fmt.Errorf("%q: %w", name, ErrInvalidName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return fmt.Errorf("%q: %w", name, ErrInvalidName)
		}
	}
	return nil
}

// MountPoints lists the directories (relative to the tree's root) every
// rootfs contains, empty, so the engine can mount on a read-only tree.
func MountPoints() []string {
	return []string{"workspace", "proc", "dev", "tmp", "sys", "run", ".nsbox"}
}
