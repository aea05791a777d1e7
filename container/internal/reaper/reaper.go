// Package reaper is the sandbox's minimal init of a run that asks for
// one (Spec.Init, `nsbox exec --init`, as `docker run --init` is tini): a
// single-threaded C loop, run by a constructor before the Go runtime
// starts, when this binary is exec'd with argv[0] Arg0. It forks the
// command, forwards every signal it gets to it, reaps every child (the
// orphans re-parented to pid 1 too) and exits with the command's status,
// 128+N when signal N ended it.
//
// It is C and not Go because a Go process has threads that come and go
// (sysmon, GC workers, one per blocking syscall), and every thread counts
// in the sandbox's pids limit: the reaper is one task, always, so the
// engine raises the limit by exactly one (container's cgroupLimits), set
// before anything of the user runs.
//
// The Go init (package sandboxinit) execs it, after the whole set-up
// (mounts, credentials, Landlock, seccomp), as
//
//	nsbox-reaper ERRFD PATH ARGV...
//
// ERRFD is the init's error pipe, left open across that exec: the child
// makes it close-on-exec before it execs PATH with ARGV, and writes an
// exec failure there in sandboxinit's form, so the engine learns of the
// command's exec as it does without the reaper.
package reaper

// Arg0 is argv[0] of the reaper (sandboxinit.ReaperArg0 says it again,
// for the init, which does not import this package).
const Arg0 = "nsbox-reaper"
