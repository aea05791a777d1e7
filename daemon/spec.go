package daemon

import (
	"os"
	"path/filepath"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
)

// spec builds the engine's Spec for j on the rootfs at dir.
func (j *job) spec(id, dir string) container.Spec {
	sp := container.Spec{
		ID:          id,
		RootfsDir:   dir,
		Argv:        j.argv,
		Env:         j.env,
		Files:       j.files,
		Limits:      j.limits,
		ReturnFiles: j.returnFiles,
	}
	switch j.language {
	case agentapi.LanguagePython:
		sp.Argv = []string{"python3", "-c", j.code}
	case agentapi.LanguageBash:
		sh := "/bin/sh"
		if hasFile(dir, "usr/bin/bash") || hasFile(dir, "bin/bash") {
			sh = "bash"
		}
		sp.Argv = []string{sh, "-c", j.code}
	}
	return sp
}

// hasFile reports whether rel exists in the rootfs at dir (a symlink counts;
// it is not followed on the host).
func hasFile(dir, rel string) bool {
	_, err := os.Lstat(filepath.Join(dir, rel))
	return err == nil
}
