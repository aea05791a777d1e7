package seccomp

import "slices"

// rule is one (name, entry) pair of the profile that applies on this host.
type rule struct {
	name  string
	entry int // index into Profile.Syscalls, for error messages
	sc    *Syscall
}

// applies reports whether s is in force for native arch and kernel kv,
// with Docker's semantics and an empty capability set: includes.caps
// entries are skipped, excludes.caps never exclude.
func (s *Syscall) applies(arch string, kv kernelVersion) bool {
	if ex := s.Excludes; ex != nil {
		if slices.Contains(ex.Arches, arch) {
			return false
		}
		if ex.MinKernel != "" {
			if min, err := parseKernelVersion(ex.MinKernel); err == nil && !kv.less(min) {
				return false
			}
		}
	}
	if in := s.Includes; in != nil {
		if len(in.Arches) > 0 && !slices.Contains(in.Arches, arch) {
			return false
		}
		if len(in.Caps) > 0 {
			return false
		}
		if in.MinKernel != "" {
			if min, err := parseKernelVersion(in.MinKernel); err == nil && kv.less(min) {
				return false
			}
		}
	}
	return true
}

// rules lists the profile's rules in force, in profile order.
func (p *Profile) rules(arch string, kv kernelVersion) []rule {
	var out []rule
	for i := range p.Syscalls {
		s := &p.Syscalls[i]
		if !s.applies(arch, kv) {
			continue
		}
		for _, n := range s.Names {
			out = append(out, rule{name: n, entry: i, sc: s})
		}
	}
	return out
}
