package container

import (
	"errors"
	"fmt"

	"github.com/nsbox/nsbox/container/workspace"
)

// Workspace gives host-side access to a sandbox's /workspace while it lives
// (package workspace); input files past its size make an invalid spec.
type Workspace struct{ *workspace.Workspace }

// WriteFile creates or replaces a file, creating parent directories, all
// owned by the sandbox user; nothing on the way is followed.
func (w Workspace) WriteFile(p string, data []byte, perm uint32) error {
	err := w.Workspace.WriteFile(p, data, perm)
	if errors.Is(err, workspace.ErrFull) {
		return fmt.Errorf("%w: input files exceed the workspace size", ErrInvalidSpec)
	}
	return err
}

// The workspace's types and path rule, under the names callers know.
type (
	FileInfo = workspace.FileInfo
	Entry    = workspace.Entry
	Snapshot = workspace.Snapshot
)

// MaxInlineBytes caps the total inline content of ReturnFiles in a Result.
const MaxInlineBytes = workspace.MaxInlineBytes

// ValidPath checks a workspace-relative path from a caller (see
// workspace.ValidPath).
func ValidPath(p string) error { return workspace.ValidPath(p) }
