package sandboxinit

import (
	"encoding/binary"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// The init stays the sandbox's pid 1 and the command is its child, as
// under docker --init (tini): a pid 1 gets no default action for a signal
// it has no handler for, so a command that were pid 1 would ignore its own
// `kill -TERM $$`, `kill -9 $$` from inside, and a SIGTERM from the host;
// and the orphans of its children would stay zombies unless it waited for
// them. The init forwards signals to the command, reaps every process
// reparented to it, and ends when the command ends, reporting how.
//
// The error pipe then carries, after a setup that succeeded, one Started
// byte once the command was exec'd, and at the command's end its raw wait
// status (4 bytes, native order); the engine reports that status as the
// command's, a death by signal included, which an exit code of init's
// could only approximate (ExitStatus). A zygote's init still execs the
// zygote itself: it reaps its children, and a zygote child is the pid 1 of
// its own namespace (docs/ARCHITECTURE.md, "PID 1").
const Started = 0

// forwarded are the signals the init passes on to the command: tini's set
// (those a fault or a terminal raises, SIGCHLD, and SIGKILL and SIGSTOP,
// which no one can catch, are not), less SIGURG, the Go runtime's own.
var forwarded = []os.Signal{
	unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGTERM, unix.SIGUSR1, unix.SIGUSR2,
	unix.SIGPIPE, unix.SIGALRM, unix.SIGWINCH, unix.SIGCONT, unix.SIGTSTP,
	unix.SIGXCPU, unix.SIGXFSZ, unix.SIGVTALRM, unix.SIGPROF, unix.SIGIO, unix.SIGPWR,
}

// spawn starts the command as the init's child and never returns once it
// has: it forwards signals to it, reaps, and exits with its status. An
// exec failure is returned, as unix.Exec's would be.
func spawn(path string, cfg *Config, errPipe *os.File) error {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...) // before the fork: none is lost
	files := []uintptr{0, 1, 2}
	if cfg.Control {
		files = append(files, 3)
	}
	// Go's ForkExec resets the handlers Notify set and the signal mask in
	// the child, and reports the exec's errno. The command leads a session
	// of its own, as it did as pid 1: its kill(0, sig) is its own group's.
	pid, err := syscall.ForkExec(path, cfg.Argv, &syscall.ProcAttr{
		Env: cfg.Env, Files: files, Sys: &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		signal.Reset()
		return execFailed(cfg.Argv[0], err)
	}
	// The command runs as the same user, in the same filters: it must not
	// ptrace the init (whose other threads are outside Landlock, which
	// binds one thread) nor read its memory.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	_, _ = errPipe.Write([]byte{Started})
	// The command's stdio is the command's: EOF on its pipes must not wait
	// for the init.
	for _, fd := range files {
		unix.Close(int(fd))
	}
	go func() {
		for s := range sigs {
			_ = unix.Kill(pid, s.(syscall.Signal))
		}
	}()
	ws := reap(pid)
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], uint32(ws))
	_, _ = errPipe.Write(b[:])
	os.Exit(ExitStatus(ws))
	return nil
}

// reap waits for every child the init has, its own and the orphans the
// kernel reparents to it, until the command (pid) has ended.
func reap(pid int) unix.WaitStatus {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || got == pid {
			return ws
		}
	}
}

// ExitStatus is a wait status as a shell gives it: the exit code, or 128+N
// for a death by signal N.
func ExitStatus(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// CommandStatus is the command's wait status the init reported after its
// Started byte (tail: what followed that byte on the error pipe), or false
// when it reported none (the init did not get that far).
func CommandStatus(tail []byte) (syscall.WaitStatus, bool) {
	if len(tail) != 4 {
		return 0, false
	}
	return syscall.WaitStatus(binary.NativeEndian.Uint32(tail)), true
}
