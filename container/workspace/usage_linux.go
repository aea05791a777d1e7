package workspace

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Used is how many bytes the workspace's tmpfs holds now.
func (w *Workspace) Used() (int64, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(w.mnt.Fd()), &st); err != nil {
		return 0, fmt.Errorf("workspace usage: %w", err)
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize, nil
}
