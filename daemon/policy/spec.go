package policy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
)

// Spec builds the engine's Spec for j on the rootfs at dir.
func (j *Job) Spec(id, dir string) container.Spec {
	sp := container.Spec{
		ID:          id,
		RootfsDir:   dir,
		Argv:        j.Argv,
		Env:         j.Env,
		Files:       j.Files,
		Limits:      j.Limits,
		ReturnFiles: j.ReturnFiles,
	}
	switch j.Language {
	case "":
	case agentapi.LanguagePython:
		sp.Argv = []string{"python3", "-c", j.Code}
	case agentapi.LanguageJavaScript, agentapi.LanguageTypeScript:
		// Both go to the Node runner (the daemon's runner path); this is
		// what a run that cannot take it (a custom seccomp profile) gets.
		sp.Argv = []string{"node", "-e", j.Code}
	case agentapi.LanguageBash:
		sh := "/bin/sh"
		if hasFile(dir, "usr/bin/bash") || hasFile(dir, "bin/bash") {
			sh = "bash"
		}
		sp.Argv = []string{sh, "-c", j.Code}
	default:
		argv, file, stdin := j.declared.program(j.Code)
		sp.Argv = argv
		if file != nil {
			sp.Files = append(slices.Clone(sp.Files), *file)
		}
		if stdin {
			sp.Stdin = strings.NewReader(j.Code)
		}
	}
	return sp
}

// hasFile reports whether rel exists in the rootfs at dir (a symlink counts;
// it is not followed on the host).
func hasFile(dir, rel string) bool {
	_, err := os.Lstat(filepath.Join(dir, rel))
	return err == nil
}
