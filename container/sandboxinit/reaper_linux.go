package sandboxinit

import (
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// ReaperArg0 is argv[0] of the minimal init a run with Config.Init gets
// (package container/internal/reaper, in the nsbox binary): this init
// execs it in place of the command, and it forks the command. The
// command is then pid 2, not 1: signals without a handler act on it as
// on a host, and pid 1 reaps orphans and forwards signals to it.
const ReaperArg0 = "nsbox-reaper"

// reaperFDs is how many fds Init adds to the config message: the
// reaper's sealed binary, right after the workspace's.
func reaperFDs(init bool) int {
	if init {
		return 1
	}
	return 0
}

// takeReaper splits the reaper's binary off the fds a config came with.
func takeReaper(cfg *Config, fds []int) (rest []int, reaper int, err error) {
	if !cfg.Init {
		return fds, -1, nil
	}
	return append([]int{fds[0]}, fds[2:]...), fds[1], nil
}

// execReaper execs the reaper (from reaper, a close-on-exec fd) with the
// command's resolved path, argv and env. The error pipe stays open
// across this exec: the reaper's child closes it at the command's exec,
// or reports the command's exec failure on it, so the engine learns of
// the command's exec as without a reaper. It returns only on failure.
func execReaper(reaper int, path string, cfg *Config) error {
	if _, err := unix.FcntlInt(fdErr, unix.F_SETFD, 0); err != nil {
		return fmt.Errorf("init: error pipe: %w", err)
	}
	argv := append([]string{ReaperArg0, strconv.Itoa(fdErr), path}, cfg.Argv...)
	err := unix.Exec("/proc/self/fd/"+strconv.Itoa(reaper), argv, cfg.Env)
	unix.FcntlInt(fdErr, unix.F_SETFD, unix.FD_CLOEXEC)
	return fmt.Errorf("exec the sandbox's init (%s): %w", ReaperArg0, err)
}
