package cgroup

import (
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/procfs"
)

// ReadSelf reads this process's mount table and cgroups from /proc/self
// (see ReadProc).
func ReadSelf() ([]Mount, map[string]string, error) {
	p, err := procfs.Self()
	if err != nil {
		return nil, nil, fmt.Errorf("cgroup: %w", err)
	}
	return readProc(p)
}

// ReadProc reads the mount table (<root>/<pid>/mountinfo) and the cgroups
// (<root>/<pid>/cgroup) of a process, from a proc file system mounted at
// root; tests pass a directory of fixtures. The cgroups map a controller to
// a cgroup path: a v1 line with several controllers ("cpu,cpuacct") gives
// one entry per controller, named hierarchies keep their "name=..." key and
// the v2 line ("0::/path") has the key "".
//
// github.com/prometheus/procfs does the parsing; what it leaves undone is
// done here: mountinfo paths are unescaped, a mount needs a mount point and
// a type, and a cgroup path must be absolute. A file that does not parse
// gives ErrMalformed. procfs reads at most 1 MiB of mountinfo (about 8,000
// mounts); a longer table nearly always ends in a cut line and so gives
// ErrMalformed too.
func ReadProc(root string, pid int) ([]Mount, map[string]string, error) {
	fs, err := procfs.NewFS(root)
	if err != nil {
		return nil, nil, fmt.Errorf("cgroup: %w", err)
	}
	p, err := fs.Proc(pid)
	if err != nil {
		return nil, nil, fmt.Errorf("cgroup: %w", err)
	}
	return readProc(p)
}

func readProc(p procfs.Proc) ([]Mount, map[string]string, error) {
	mi, err := p.MountInfo()
	if err != nil {
		return nil, nil, procError("mountinfo", err)
	}
	cgs, err := p.Cgroups()
	if err != nil {
		return nil, nil, procError("cgroup", err)
	}
	self := make(map[string]string, len(cgs))
	for _, c := range cgs {
		if !strings.HasPrefix(c.Path, "/") {
			return nil, nil, fmt.Errorf("cgroup: hierarchy %d: relative path %q: %w", c.HierarchyID, c.Path, ErrMalformed)
		}
		if len(c.Controllers) == 0 {
			self[""] = c.Path
		}
		for _, ctrl := range c.Controllers {
			self[ctrl] = c.Path
		}
	}
	mounts := make([]Mount, 0, len(mi))
	for i, m := range mi {
		// procfs splits on single spaces and so accepts empty fields.
		if m.FSType == "" || m.MountPoint == "" {
			return nil, nil, fmt.Errorf("cgroup: mountinfo line %d: empty mount point or type: %w", i+1, ErrMalformed)
		}
		mounts = append(mounts, Mount{
			Root:         unescapeOctal(m.Root),
			Mountpoint:   unescapeOctal(m.MountPoint),
			FSType:       m.FSType,
			Source:       unescapeOctal(m.Source),
			Options:      m.Options,
			SuperOptions: m.SuperOptions,
		})
	}
	return mounts, self, nil
}

// procError wraps an error of procfs; a parse error is ErrMalformed.
func procError(file string, err error) error {
	if errors.Is(err, procfs.ErrFileParse) {
		return fmt.Errorf("cgroup: %s: %w: %w", file, ErrMalformed, err)
	}
	return fmt.Errorf("cgroup: %s: %w", file, err)
}
