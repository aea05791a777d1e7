package lang

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nsbox/nsbox/daemon/errdefs"
)

// Registry is the built-in languages and the operator's declared ones.
// It does not change; the daemon's policy holds one (a reload makes
// another).
type Registry struct {
	declared map[string]*Descriptor
	names    []string // declared, sorted
}

// New makes the registry of the built-in languages and declared.
func New(declared []Declared) (*Registry, error) {
	r := &Registry{declared: make(map[string]*Descriptor, len(declared))}
	for _, l := range declared {
		if err := l.Check(); err != nil {
			return nil, err
		}
		if _, dup := r.declared[l.Name]; dup {
			return nil, fmt.Errorf("language %q declared twice", l.Name)
		}
		r.declared[l.Name] = l.descriptor()
		r.names = append(r.names, l.Name)
	}
	slices.Sort(r.names)
	return r, nil
}

// On lists the languages a run may use on the rootfs name whose tree is
// dir ("": unknown): the built-in ones it has what they need for, then
// those declared for it (or for every rootfs), sorted.
func (r *Registry) On(rootfs, dir string) []string {
	var out []string
	for _, d := range builtin {
		if d.OnRootfs(dir) {
			out = append(out, d.Name)
		}
	}
	for _, n := range r.names {
		if l := r.declared[n].declared; len(l.Rootfs) == 0 || slices.Contains(l.Rootfs, rootfs) {
			out = append(out, n)
		}
	}
	return out
}

// Resolve returns the language name (or alias) on the rootfs name whose
// tree is dir, or a FieldError on "language" that says what the rootfs has.
func (r *Registry) Resolve(name, rootfs, dir string) (*Descriptor, error) {
	if d, ok := Builtin(name); ok {
		if d.argvOnly(dir) {
			return nil, argvOnlyError(name, rootfs, r.On(rootfs, dir))
		}
		if !d.OnRootfs(dir) {
			return nil, errdefs.Field("language", "%q needs %s in the rootfs, and rootfs %q has %s; use a rootfs of the %s profile (nsbox rootfs build --profile %s)",
				name, d.needsWhat, rootfs, strings.Join(r.On(rootfs, dir), ", "), d.profile, d.profile)
		}
		return d, nil
	}
	d, ok := r.declared[name]
	if ok && (len(d.declared.Rootfs) == 0 || slices.Contains(d.declared.Rootfs, rootfs)) {
		return d, nil
	}
	why := "is not a language of this daemon"
	if ok {
		why = fmt.Sprintf("is declared for rootfs %s only", strings.Join(d.declared.Rootfs, ", "))
	}
	return nil, errdefs.Field("language", "%q %s; rootfs %q has %s (the operator declares more in [languages.NAME])",
		name, why, rootfs, strings.Join(r.On(rootfs, dir), ", "))
}

// Sessions lists the languages a session may run.
func Sessions() []string {
	var out []string
	for _, d := range builtin {
		if d.Sessions() {
			out = append(out, d.Name)
		}
	}
	return out
}
