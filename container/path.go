package container

import (
	"fmt"
	"strings"
)

// ValidPath checks a workspace-relative path from a caller: not empty, not
// absolute, no "." or ".." components, no NUL, no empty components.
func ValidPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty path")
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("path %q contains a NUL byte", p)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is absolute; paths are relative to /workspace", p)
	case len(p) > 4096:
		return fmt.Errorf("path is longer than 4096 bytes")
	}
	for _, c := range strings.Split(p, "/") {
		switch c {
		case "..":
			return fmt.Errorf("path %q escapes the workspace (..)", p)
		case ".", "":
			return fmt.Errorf("path %q has an empty or \".\" component", p)
		}
	}
	return nil
}
