package workspace

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// Bounds on a workspace path, the kernel's PATH_MAX and NAME_MAX.
const (
	MaxPathBytes = 4096
	MaxNameBytes = 255
)

// ValidPath checks a workspace-relative path from a caller: not empty, no
// NUL, valid UTF-8, at most MaxPathBytes, not absolute, no ".." element,
// no element over MaxNameBytes, and in clean form (no ".", empty elements
// or trailing slash). Each message names the problem and the fix.
func ValidPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty path; give a file's path relative to /workspace")
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("path %q contains a NUL byte; remove it", p)
	case !utf8.ValidString(p):
		return fmt.Errorf("path %q is not valid UTF-8; encode it as UTF-8", p)
	case len(p) > MaxPathBytes:
		return fmt.Errorf("path is %d bytes long; shorten it to at most %d", len(p), MaxPathBytes)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is absolute; give it relative to /workspace", p)
	}
	for el := range strings.SplitSeq(p, "/") {
		if el == ".." {
			return fmt.Errorf("path %q escapes the workspace with a \"..\" element; remove it", p)
		}
		if len(el) > MaxNameBytes {
			return fmt.Errorf("path %q has an element of %d bytes; shorten it to at most %d", p, len(el), MaxNameBytes)
		}
	}
	if c := path.Clean(p); c != p || p == "." {
		return fmt.Errorf("path %q is not in clean form (a \".\" or empty element, or a trailing slash); write it as %q", p, c)
	}
	return nil
}
