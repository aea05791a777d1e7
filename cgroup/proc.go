package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
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
	return readProc(p, "/proc/self/mountinfo")
}

// ReadProc reads the mount table (<root>/<pid>/mountinfo) and the cgroups
// (<root>/<pid>/cgroup) of a process, from a proc file system mounted at
// root; tests pass a directory of fixtures. The cgroups map a controller to
// a cgroup path: a v1 line with several controllers ("cpu,cpuacct") gives
// one entry per controller, named hierarchies keep their "name=..." key and
// the v2 line ("0::/path") has the key "".
//
// github.com/prometheus/procfs parses the cgroup file; a cgroup path must
// be absolute. mountinfo is read here, line by line: procfs reads at most
// 1 MiB of it (about 8,000 mounts), and a busy Kubernetes node can have
// more, where the engine must still start. A file that does not parse
// gives ErrMalformed.
func ReadProc(root string, pid int) ([]Mount, map[string]string, error) {
	fs, err := procfs.NewFS(root)
	if err != nil {
		return nil, nil, fmt.Errorf("cgroup: %w", err)
	}
	p, err := fs.Proc(pid)
	if err != nil {
		return nil, nil, fmt.Errorf("cgroup: %w", err)
	}
	return readProc(p, filepath.Join(root, strconv.Itoa(pid), "mountinfo"))
}

func readProc(p procfs.Proc, mountinfo string) ([]Mount, map[string]string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, nil, fmt.Errorf("cgroup: %w", err)
	}
	defer f.Close()
	mounts, err := parseMountinfo(f)
	if err != nil {
		return nil, nil, err
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
	return mounts, self, nil
}

// parseMountinfo parses a mountinfo file (proc(5)) as it streams, with no
// limit on its length.
func parseMountinfo(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20) // one line, not the file
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 6 || len(g) < 2 {
			return nil, fmt.Errorf("cgroup: mountinfo line %d: want 6 fields, \" - \", type and source: %w", n, ErrMalformed)
		}
		m := Mount{Root: unescapeOctal(f[3]), Mountpoint: unescapeOctal(f[4]), FSType: g[0], Source: unescapeOctal(g[1]),
			Options: mountOptions(f[5])}
		if len(g) > 2 {
			m.SuperOptions = mountOptions(g[2])
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cgroup: mountinfo: %w", err)
	}
	return out, nil
}

// mountOptions splits "rw,mode=755" into {"rw": "", "mode": "755"}, as
// procfs does.
func mountOptions(s string) map[string]string {
	out := map[string]string{}
	for _, o := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(o, "=")
		out[k] = v
	}
	return out
}

// procError wraps an error of procfs; a parse error is ErrMalformed.
func procError(file string, err error) error {
	if errors.Is(err, procfs.ErrFileParse) {
		return fmt.Errorf("cgroup: %s: %w: %w", file, ErrMalformed, err)
	}
	return fmt.Errorf("cgroup: %s: %w", file, err)
}
