package envd

import (
	"encoding/base64"
	"net/http"
	"path"
	"strings"

	"github.com/nsbox/nsbox/daemon/errdefs"
)

// Home is the sandbox user's home as the SDKs know it (their default user
// is "user"). nsbox mounts the sandbox's workspace there as well as at
// /workspace, so both name the same files.
const Home = "/home/user"

// target is a path as an SDK sends it, resolved: in the workspace (ws,
// rel relative to it), served by the core's beneath-the-workspace file
// operations, or anywhere else in the sandbox (abs), served by the
// sandbox's process agent, inside the sandbox as its user (container/procs
// files.go; docs/SECURITY.md).
type target struct {
	abs string // the sandbox path, cleaned
	rel string // relative to the workspace ("" its root), when ws
	ws  bool
}

// sandboxTarget resolves a path as E2B does: absolute, or relative to
// /home/user; ".." is resolved lexically here, everything else (symlinks)
// by whoever serves it.
func sandboxTarget(field, p string) (target, error) {
	if p == "" {
		return target{}, errdefs.Field(field, "is empty")
	}
	if strings.ContainsRune(p, 0) {
		return target{}, errdefs.Field(field, "contains NUL")
	}
	if !strings.HasPrefix(p, "/") {
		p = Home + "/" + p
	}
	p = path.Clean(p)
	for _, root := range []string{Home, "/workspace"} {
		if p == root {
			return target{abs: p, ws: true}, nil
		}
		if rel, ok := strings.CutPrefix(p, root+"/"); ok {
			return target{abs: p, rel: rel, ws: true}, nil
		}
	}
	return target{abs: p}, nil
}

// workspacePath is sandboxTarget for a path that must be in the workspace
// (a symlink's end the core's operations can describe).
func workspacePath(field, p string) (string, error) {
	t, err := sandboxTarget(field, p)
	if err != nil {
		return "", err
	}
	if !t.ws {
		return "", errdefs.Field(field, "%q is outside the sandbox's workspace", t.abs)
	}
	return t.rel, nil
}

// sandboxPath is the SDK's view of a workspace path.
func sandboxPath(rel string) string {
	if rel == "" {
		return Home
	}
	return Home + "/" + rel
}

// rootUser reports whether a request asks to act as root: envd's user,
// in a Connect request's basic Authorization ("root:") or /files'
// ?username.
func rootUser(h http.Header, username string) bool {
	if username != "" {
		return username == "root"
	}
	enc, ok := strings.CutPrefix(h.Get("Authorization"), "Basic ")
	if !ok {
		return false
	}
	b, err := base64.StdEncoding.DecodeString(enc)
	return err == nil && strings.HasPrefix(string(b), "root:")
}

// checkWrite refuses a change outside the workspace asked for as root:
// the files API acts as the sandbox's user, whom the root filesystem does
// not let write where root could (docs/E2B.md).
func checkWrite(t target, root bool) error {
	if root && !t.ws {
		return errdefs.Field("user", "%q: the files API acts as the sandbox's user, not root; writing outside %s as root needs a writable root filesystem, which nsbox sandboxes do not have yet (docs/E2B.md); write under %s, /tmp or /dev/shm as the default user", t.abs, Home, Home)
	}
	return nil
}
