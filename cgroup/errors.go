package cgroup

import "errors"

var (
	// ErrUnavailable means no usable cgroup hierarchy is mounted.
	ErrUnavailable = errors.New("no usable cgroup hierarchy: mount cgroup2 at /sys/fs/cgroup or the v1 memory, pids and cpu controllers")
	// ErrInvalidName means a manager name or cgroup id is not a single path element.
	ErrInvalidName = errors.New("invalid cgroup name: use a single path element without '/'")
	// ErrController means a limit was asked for a controller that is not available.
	ErrController = errors.New("cgroup controller not available")
	// ErrSharedCgroup means this process shares its v2 cgroup with other
	// processes, so controllers cannot be delegated below it.
	ErrSharedCgroup = errors.New("own cgroup has other processes, cannot enable controllers for sandboxes: run nsbox in a cgroup of its own (systemd service with Delegate=yes, or systemd-run -p Delegate=yes)")
	// ErrKillTimeout means processes were still in the cgroup after Kill gave up.
	ErrKillTimeout = errors.New("processes still in cgroup after kill")
	// ErrFreezeTimeout: the kernel did not report the cgroup frozen in time.
	ErrFreezeTimeout = errors.New("cgroup not frozen in time")
	// ErrLeader: the thread group leader cannot be moved alone; on v1 its
	// memory cgroup is where the whole process's memory is charged.
	ErrLeader = errors.New("the thread group leader cannot move into a cgroup alone")
	// ErrMalformed means a /proc or cgroup file could not be parsed.
	ErrMalformed = errors.New("malformed cgroup file")
)
