package cgroup

import (
	"path"
	"path/filepath"
	"strings"
)

// v1Controllers are the v1 controllers a Manager uses, in the order they are
// written. cpuset, devices and blkio are deliberately left alone.
var v1Controllers = [...]string{"memory", "pids", "cpu", "cpuacct", "freezer"}

// V1Controllers returns the v1 controllers a Manager uses.
func V1Controllers() []string { return append([]string(nil), v1Controllers[:]...) }

// V2Controllers returns the v2 controllers a Manager enables for sandboxes.
func V2Controllers() []string { return []string{"memory", "pids", "cpu"} }

// Layout says where this process's own cgroup is in each hierarchy.
type Layout struct {
	Mode Mode
	// Unified is the directory of the own cgroup in the cgroup2 hierarchy
	// ("" if none is mounted). On v2 sandboxes live below it.
	Unified string
	// V1 maps each mounted v1 controller (memory, pids, cpu, ...) to the
	// directory of the own cgroup in its hierarchy. Empty on v2.
	V1 map[string]string
	// V1Mounts maps each mounted v1 controller to its mountpoint.
	V1Mounts map[string]string
}

// Locate combines the mount table and /proc/self/cgroup into a Layout.
func Locate(mounts []Mount, self map[string]string) Layout {
	l := Layout{Mode: DetectMode(mounts)}
	for _, m := range mounts {
		switch m.FSType {
		case "cgroup2":
			p, ok := self[""]
			if !ok || l.Unified != "" {
				continue
			}
			if l.Mode == ModeV2 && m.Mountpoint != "/sys/fs/cgroup" && hasMount(mounts, "cgroup2", "/sys/fs/cgroup") {
				continue
			}
			if dir, ok := join(m, p); ok {
				l.Unified = dir
			}
		case "cgroup":
			if l.Mode == ModeV2 {
				continue
			}
			for _, c := range m.Controllers() {
				if _, seen := l.V1[c]; seen {
					continue
				}
				p, ok := self[c]
				if !ok {
					continue
				}
				dir, ok := join(m, p)
				if !ok {
					continue
				}
				if l.V1 == nil {
					l.V1 = make(map[string]string)
					l.V1Mounts = make(map[string]string)
				}
				l.V1[c] = dir
				l.V1Mounts[c] = m.Mountpoint
			}
		}
	}
	return l
}

func hasMount(mounts []Mount, fstype, mountpoint string) bool {
	for _, m := range mounts {
		if m.FSType == fstype && m.Mountpoint == mountpoint {
			return true
		}
	}
	return false
}

// join maps a cgroup path from /proc/self/cgroup to a directory under the
// mount m. A mount whose root is a subtree (a container's bind mount) only
// holds paths below that root; inside a cgroup namespace the root is "/".
func join(m Mount, p string) (string, bool) {
	p = path.Clean(p)
	root := path.Clean(m.Root)
	if root != "/" {
		switch {
		case p == root:
			p = "/"
		case strings.HasPrefix(p, root+"/"):
			p = strings.TrimPrefix(p, root)
		default:
			return "", false
		}
	}
	return filepath.Join(m.Mountpoint, p), true
}
