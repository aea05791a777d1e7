// Package cgroup gives every sandbox its own cgroup with memory, pids and CPU
// limits, on cgroup v2 and on v1 (including the hybrid layout: v1 controllers
// plus a controller-less cgroup2 at /sys/fs/cgroup/unified).
//
// A Manager owns one parent cgroup, <this process's cgroup>/<name>, in every
// hierarchy it uses; each sandbox is a leaf under it. On v2 a leaf can be the
// target of clone3(CLONE_INTO_CGROUP) through Cgroup.CloneFD; on v1 a pid is
// moved in with Cgroup.Add.
//
// The package writes cgroup files directly rather than through
// github.com/containerd/cgroups/v3: a sandbox touches five files at creation
// and a handful at teardown, and the containerd managers read or write many
// more (every controller of every hierarchy), which costs time on the spawn
// path. The parsers for /proc/self/cgroup, mountinfo and cgroup.controllers
// take an io.Reader and are tested on fixtures.
package cgroup
