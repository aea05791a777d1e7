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
// path, and reading a finished sandbox's statistics through them costs about
// 3.5 times the hand-written Stats on v1 (BenchmarkStats). Where this process
// sits is read by ReadSelf and ReadProc: /proc/<pid>/cgroup through
// github.com/prometheus/procfs, mountinfo streamed by hand (procfs stops at
// 1 MiB of it); the fixtures in testdata are /proc-shaped trees. docs/ARCHITECTURE.md ("Libraries for /proc and
// cgroup files") has every decision and its figure.
package cgroup
