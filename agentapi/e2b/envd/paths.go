package envd

import (
	"path"
	"strings"

	"github.com/nsbox/nsbox/daemon/errdefs"
)

// Home is the sandbox user's home as the SDKs know it (their default user
// is "user"). nsbox mounts the sandbox's workspace there as well as at
// /workspace, so both name the same files.
const Home = "/home/user"

// workspacePath turns a path as an SDK sends it into one relative to the
// workspace ("" for its root): absolute under /home/user or /workspace, or
// relative to /home/user as E2B resolves it. Anything else is outside what
// the host can reach safely: the rest of the sandbox's tree is the
// read-only rootfs or its own tmpfs.
func workspacePath(field, p string) (string, error) {
	if p == "" {
		return "", errdefs.Field(field, "is empty")
	}
	if strings.ContainsRune(p, 0) {
		return "", errdefs.Field(field, "contains NUL")
	}
	if !strings.HasPrefix(p, "/") {
		p = Home + "/" + p
	}
	p = path.Clean(p)
	for _, root := range []string{Home, "/workspace"} {
		if p == root {
			return "", nil
		}
		if rel, ok := strings.CutPrefix(p, root+"/"); ok {
			return rel, nil
		}
	}
	return "", errdefs.Field(field, "%q is outside the sandbox's workspace: the files API reaches %s (the same files as /workspace); read other paths with commands.run, e.g. cat", p, Home)
}

// sandboxPath is the SDK's view of a workspace path.
func sandboxPath(rel string) string {
	if rel == "" {
		return Home
	}
	return Home + "/" + rel
}
