package container

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/cgroup"
	"github.com/nsbox/nsbox/container/internal/initproc"
	"github.com/nsbox/nsbox/container/internal/locks"
	"github.com/nsbox/nsbox/container/sandboxinit"
)

// initProcess is a sandbox whose main process an init the engine cloned
// became (package initproc).
type initProcess struct {
	*initproc.Proc
	exited chan struct{}
}

// initProcesses makes the process of an engine's sandbox: a spare init
// when one is ready, else one cloned now (cold); with zb, a zygote's init
// (never a spare).
func (e *Engine) initProcesses(zb *locks.Block) func(*description) (process, error) {
	return func(d *description) (process, error) {
		lim := d.cgroupLimits()
		if e.spares != nil && zb == nil {
			if p := e.spares.Take(); p != nil {
				if p.Limits == lim {
					return newInitProcess(p), nil
				}
				if err := p.Cg.SetLimits(lim); err == nil {
					p.Limits = lim
					return newInitProcess(p), nil
				}
				p.Destroy()
			}
		}
		p, err := e.newInit(d.id, lim, zb)
		if err != nil {
			return nil, err
		}
		return newInitProcess(p), nil
	}
}

func (e *Engine) newInit(name string, l cgroup.Limits, zb *locks.Block) (*initproc.Proc, error) {
	return initproc.Start(initproc.Options{Name: name, Limits: l, Cgroups: e.cgroups, Self: e.self, UIDs: e.uids, LiveDir: e.liveDir, Block: zb, Spawner: e.spawner})
}

func newInitProcess(p *initproc.Proc) *initProcess {
	return &initProcess{Proc: p, exited: make(chan struct{})}
}

// errCommandNotFound is an init's report that the command does not exist:
// like a shell, the run still happens, with the message on its stderr.
type errCommandNotFound struct{ msg string }

func (e *errCommandNotFound) Error() string { return e.msg }

func (p *initProcess) owner() int             { return p.Owner }
func (p *initProcess) cgroup() *cgroup.Cgroup { return p.Cg }
func (p *initProcess) pid() int               { return p.Process.Pid }
func (p *initProcess) done() <-chan struct{}  { return p.exited }
func (p *initProcess) destroy()               { p.Destroy() }

func (p *initProcess) signal(sig syscall.Signal) error { return p.Process.Signal(sig) }

// launch gives init its config and workspace, makes sure it sits in its
// cgroup, and returns once the user's command has been exec'd.
func (p *initProcess) launch(d *description, mounts []*os.File) error {
	// An init that still has to be placed (v1 without a spawner) builds
	// its mounts meanwhile.
	cfg, err := json.Marshal(d.initConfig(p.Zygote, p.Cg.CloneFD() < 0))
	if err != nil {
		return err
	}
	if err := p.Send(cfg, mounts...); err != nil {
		return p.Failed(err)
	}
	if err := p.Place(); err != nil {
		return err
	}
	if d.beforeStart != nil {
		if err := d.beforeStart(p.pid()); err != nil {
			return err
		}
	}
	if err := p.Go(); err != nil {
		return p.Failed(err)
	}
	// EOF on the error pipe without a message means the exec happened.
	msg := p.SetupError()
	notFound := sandboxinit.ParseExecError(msg) == nil && strings.Contains(msg, "command not found")
	if msg != "" && !notFound {
		p.Cg.Kill()
		p.Wait()
		return execError(msg)
	}
	go func() {
		// Wait on the process without reaping it, so done fires even
		// before anyone waits.
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, p.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if !errors.Is(err, unix.EINTR) {
				break
			}
		}
		close(p.exited)
	}()
	if notFound {
		return &errCommandNotFound{msg}
	}
	return nil
}

func (p *initProcess) stdio() (stdout, stderr, stdin, control *os.File) {
	stdin, p.Stdin = p.Stdin, nil
	return p.Stdout, p.Stderr, stdin, p.Control
}

func (p *initProcess) hasExited() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, p.Process.Pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	// ECHILD: already reaped. With WNOHANG the kernel leaves si_signo 0
	// while the child runs.
	return errors.Is(err, unix.ECHILD) || err == nil && info.Signo == int32(unix.SIGCHLD)
}

func (p *initProcess) wait() (syscall.WaitStatus, bool) {
	if ps := p.Wait(); ps != nil {
		ws, ok := ps.Sys().(syscall.WaitStatus)
		return ws, ok
	}
	return 0, false
}

// ExecError is an execve failure the sandbox's init reported: argv[0] and
// the errno.
type ExecError = sandboxinit.ExecError

// commandErrnos are execve's errors that the file at argv[0] (or the
// arguments) cause; any other (ENOMEM, EFAULT...) is the engine's.
var commandErrnos = []syscall.Errno{
	syscall.ENOENT, syscall.EACCES, syscall.ENOTDIR, syscall.EISDIR, syscall.ENOEXEC,
	syscall.ELOOP, syscall.ENAMETOOLONG, syscall.ETXTBSY, syscall.E2BIG, syscall.ELIBBAD,
}

// execError is the error of a run whose init reported msg: ErrBadCommand
// for an exec failure of the command's own making, else a set-up failure.
func execError(msg string) error {
	if ee := sandboxinit.ParseExecError(msg); ee != nil {
		if slices.Contains(commandErrnos, ee.Errno) {
			return fmt.Errorf("%w: %w", ErrBadCommand, ee)
		}
		return fmt.Errorf("sandbox init: %w", ee)
	}
	return fmt.Errorf("sandbox init: %s", msg)
}
