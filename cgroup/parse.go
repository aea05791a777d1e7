package cgroup

import (
	"fmt"
	"io"
	"slices"
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

// Mount is one line of /proc/<pid>/mountinfo, as ReadProc gives it.
type Mount struct {
	Root       string // the path inside the filesystem that is mounted (field 4)
	Mountpoint string
	FSType     string
	Source     string
	Options    map[string]string // per-mount options
	// SuperOptions are the per-superblock options; for cgroup v1 they name
	// the controllers. An option without a value maps to "".
	SuperOptions map[string]string
}

// Controllers returns the v1 controllers (and "name=" hierarchies) of a cgroup
// v1 mount, sorted, from its super options. It is empty for other mounts.
func (m Mount) Controllers() []string {
	if m.FSType != "cgroup" {
		return nil
	}
	var out []string
	for o, v := range m.SuperOptions {
		switch o {
		case "rw", "ro", "", "noprefix", "clone_children", "xattr", "cpuset_v2_mode", "favordynmods", "release_agent":
		case "name":
			out = append(out, "name="+v)
		default:
			out = append(out, o)
		}
	}
	slices.Sort(out)
	return out
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
