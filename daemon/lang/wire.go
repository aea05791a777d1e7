package lang

import "github.com/nsbox/nsbox/agentapi"

// Wire is d as GET /v1/info describes it.
func (d *Descriptor) Wire() agentapi.LanguageInfo {
	return agentapi.LanguageInfo{
		Name:           d.Name,
		Aliases:        d.Aliases,
		Title:          d.Title,
		Description:    d.Description,
		Default:        d == Default(),
		Runner:         string(d.Runner),
		Transform:      string(d.Transform),
		Sessions:       d.Sessions(),
		ForkPark:       d.Carriable(),
		AllowedImports: d.AllowedImports(),
		Zygote:         d.Zygote(),
		OneShot:        d.HasOneShot(),
	}
}

// BuiltinInfo describes the built-in languages, as a daemon of this
// build lists them before the operator's: what `nsbox tools` describes
// without asking a daemon.
func BuiltinInfo() []agentapi.LanguageInfo {
	out := make([]agentapi.LanguageInfo, 0, len(builtin))
	for _, d := range builtin {
		out = append(out, d.Wire())
	}
	return out
}

// Info describes every language of r: the built-in ones, then the
// declared ones, sorted.
func (r *Registry) Info() []agentapi.LanguageInfo {
	out := BuiltinInfo()
	for _, n := range r.names {
		out = append(out, r.declared[n].Wire())
	}
	return out
}
