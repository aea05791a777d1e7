package policy

import (
	"slices"
	"strings"

	"github.com/nsbox/nsbox/container"
)

// Spec builds the engine's Spec for j on the rootfs at dir, for a run
// that goes to the engine: an argv run, or code as its language's
// one-shot program (lang.Descriptor.OneShot). A run whose language has
// none (it needs its runner) gets no Argv; the daemon refuses it first.
func (j *Job) Spec(id, dir string) container.Spec {
	sp := j.CellSpec(id, dir)
	if j.Lang == nil {
		return sp
	}
	p, ok := j.Lang.OneShot(j.Code, dir)
	if !ok {
		return sp
	}
	sp.Argv = p.Argv
	if p.File != nil {
		sp.Files = append(slices.Clone(sp.Files), *p.File)
	}
	if p.Stdin {
		sp.Stdin = strings.NewReader(j.Code)
	}
	return sp
}

// CellSpec builds the Spec of the sandbox of a run whose code goes to a
// runner: the runner sets the command.
func (j *Job) CellSpec(id, dir string) container.Spec {
	return container.Spec{
		ID:          id,
		RootfsDir:   dir,
		Argv:        j.Argv,
		Env:         j.Env,
		Files:       j.Files,
		Limits:      j.Limits,
		ReturnFiles: j.ReturnFiles,
		Init:        j.Init,
	}
}
