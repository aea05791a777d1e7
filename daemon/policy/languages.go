package policy

import (
	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/lang"
)

// Languages lists the languages a run may use on rootfs (the registry's
// rows the rootfs has what they need for).
func (pol *Rules) Languages(rootfs string) []string {
	return pol.langs.On(rootfs, pol.rootfsDir(rootfs))
}

// language resolves a run's language on rootfs.
func (pol *Rules) language(name, rootfs string) (*lang.Descriptor, error) {
	return pol.langs.Resolve(name, rootfs, pol.rootfsDir(rootfs))
}

// Language resolves the language name on rootfs: a field error on
// "language" that says what the rootfs has when it cannot run there.
func (pol *Rules) Language(name, rootfs string) (*lang.Descriptor, error) {
	return pol.language(name, rootfs)
}

// rootfsDir is the tree of the rootfs name, for what it has; "" when
// unknown.
func (pol *Rules) rootfsDir(name string) string {
	if pol.RootfsDir == nil {
		return ""
	}
	dir, err := pol.RootfsDir(name)
	if err != nil {
		return ""
	}
	return dir
}

// LanguageInfo describes the daemon's languages (GET /v1/info).
func (pol *Rules) LanguageInfo() []agentapi.LanguageInfo { return pol.langs.Info() }
