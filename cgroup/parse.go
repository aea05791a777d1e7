package cgroup

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Mode is the cgroup layout of a host.
type Mode string

// The cgroup layouts.
const (
	ModeV2          Mode = "v2"
	ModeV1          Mode = "v1"
	ModeHybrid      Mode = "hybrid" // v1 controllers plus a cgroup2 at /sys/fs/cgroup/unified; v1 is used
	ModeUnavailable Mode = "unavailable"
)

// Mount is one line of /proc/self/mountinfo.
type Mount struct {
	Root         string // the path inside the filesystem that is mounted (field 4)
	Mountpoint   string
	FSType       string
	Source       string
	Options      string // per-mount options
	SuperOptions string // per-superblock options; for cgroup v1 it names the controllers
}

// Controllers returns the v1 controllers (and "name=" hierarchies) of a cgroup
// v1 mount, from its super options. It is empty for other mounts.
func (m Mount) Controllers() []string {
	if m.FSType != "cgroup" {
		return nil
	}
	var out []string
	for _, o := range strings.Split(m.SuperOptions, ",") {
		switch {
		case o == "rw" || o == "ro" || o == "" || o == "noprefix" || o == "clone_children" ||
			o == "xattr" || o == "cpuset_v2_mode" || o == "favordynmods":
		case strings.HasPrefix(o, "release_agent="):
		default:
			out = append(out, o)
		}
	}
	return out
}

// ParseProcCgroup parses /proc/<pid>/cgroup into controller -> cgroup path.
// A v1 line with several controllers ("cpu,cpuacct") gives one entry per
// controller; named hierarchies keep their "name=..." key; the v2 line
// ("0::/path") has the key "".
func ParseProcCgroup(r io.Reader) (map[string]string, error) {
	out := make(map[string]string)
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if line == "" {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") {
			return nil, fmt.Errorf("proc cgroup line %d %q: %w", n, line, ErrMalformed)
		}
		if _, err := strconv.Atoi(parts[0]); err != nil {
			return nil, fmt.Errorf("proc cgroup line %d %q: hierarchy id: %w", n, line, ErrMalformed)
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read proc cgroup: %w", err)
	}
	return out, nil
}

// ParseMountinfo parses /proc/<pid>/mountinfo (see proc(5)).
func ParseMountinfo(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if line == "" {
			continue
		}
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			return nil, fmt.Errorf("mountinfo line %d: no ' - ' separator: %w", n, ErrMalformed)
		}
		f := strings.Fields(pre)
		if len(f) < 6 {
			return nil, fmt.Errorf("mountinfo line %d: %d fields before separator, want >= 6: %w", n, len(f), ErrMalformed)
		}
		g := strings.Fields(post)
		if len(g) < 2 {
			return nil, fmt.Errorf("mountinfo line %d: %d fields after separator, want >= 2: %w", n, len(g), ErrMalformed)
		}
		m := Mount{
			Root:       unescapeOctal(f[3]),
			Mountpoint: unescapeOctal(f[4]),
			Options:    f[5],
			FSType:     g[0],
			Source:     unescapeOctal(g[1]),
		}
		if len(g) > 2 {
			m.SuperOptions = g[2]
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return out, nil
}

// unescapeOctal undoes the kernel's \ooo escaping of space, tab, newline and
// backslash in mountinfo paths.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ParseControllers parses a cgroup v2 cgroup.controllers or
// cgroup.subtree_control file: controller names separated by spaces.
func ParseControllers(r io.Reader) ([]string, error) {
	b, err := io.ReadAll(io.LimitReader(r, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("read controllers: %w", err)
	}
	f := strings.Fields(string(b))
	if f == nil {
		f = []string{}
	}
	return f, nil
}

// DetectMode tells the cgroup layout from the mount table: a cgroup2 at
// /sys/fs/cgroup is v2; mounted v1 controllers are v1, or hybrid when a
// cgroup2 is also mounted (at /sys/fs/cgroup/unified); a cgroup2 elsewhere
// without v1 controllers is v2.
func DetectMode(mounts []Mount) Mode {
	var v1, v2Any bool
	for _, m := range mounts {
		switch m.FSType {
		case "cgroup2":
			if m.Mountpoint == "/sys/fs/cgroup" {
				return ModeV2
			}
			v2Any = true
		case "cgroup":
			for _, c := range m.Controllers() {
				if !strings.HasPrefix(c, "name=") {
					v1 = true
				}
			}
		}
	}
	switch {
	case v1 && v2Any:
		return ModeHybrid
	case v1:
		return ModeV1
	case v2Any:
		return ModeV2
	}
	return ModeUnavailable
}
