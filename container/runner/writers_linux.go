package runner

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/internal/procfd"
)

// fenceWait bounds the wait for a fence's reply: the runner answers one at
// once, between cells; past it the runner is taken for hung.
const fenceWait = 5 * time.Second

// cutWriters stops the background writers of a cell that passed its
// output cap (res, StatusOutputLimit, the runner alive), so that what
// they write cannot land in the next cell or fill the runner's lifetime
// cap: the sandbox's processes that still hold its stdout or stderr are
// killed (killWriters), the threads the cell started are ended (Python:
// SystemExit raised in each), then a fence lets what they had written
// pass between cells, where it is dropped. When output still comes after
// that (a second fence finds it), its writer is in the interpreter (a
// Node timer, a thread in a C loop) and cannot be cut off alone: the
// sandbox is killed, and res says the runner is dead. A thread in a
// blocking call (a sleep) ends when the call returns, before it writes
// again. res.Error says what was done. The caller holds r.sem.
func (r *Runner) cutWriters(res *Result) {
	n, err := r.killWriters()
	if err != nil {
		r.sb.Kill(container.StatusOutputLimit)
		r.setDead(StatusOutputLimit, fmt.Sprintf("the cell's output passed its cap and its background writers could not be stopped (%v); the sandbox was killed", err))
		_, res.Error = r.Dead()
		res.Killed = true
		return
	}
	var done []string
	if n > 0 {
		done = append(done, fmt.Sprintf("%d process(es) it started that went on writing to its output were killed", n))
	}
	_, rep, ok := r.fence(true)
	if !ok {
		r.lost(res)
		return
	}
	switch {
	case rep.Stopped > 0 && rep.Left > 0:
		done = append(done, fmt.Sprintf("%d thread(s) it started were stopped (%d of them at the end of a blocking call)", rep.Stopped, rep.Left))
	case rep.Stopped > 0:
		done = append(done, fmt.Sprintf("%d thread(s) it started were stopped", rep.Stopped))
	}
	if len(done) > 0 {
		res.Error = "the cell's output passed its cap; " + strings.Join(done, "; ")
	}
	late, _, ok := r.fence(false)
	if !ok {
		r.lost(res)
		return
	}
	if late == 0 {
		return
	}
	why := "the cell's output passed its cap and the interpreter went on writing after it (a thread or timer the cell started that could not be stopped); the sandbox was killed"
	r.setDead(StatusOutputLimit, why)
	r.sb.Kill(container.StatusOutputLimit)
	<-r.sb.Done()
	_, res.Error = r.Dead()
	res.Killed = true
}

// lost says in res that the runner died during a fence (an OOM, a crash,
// or no answer and killed): it is dead, and why.
func (r *Runner) lost(res *Result) {
	r.died()
	_, res.Error = r.Dead()
	res.Killed = true
}

// fence asks the runner to mark its output (with stopThreads, after ending
// the threads the last cell started) and waits until the marks went by:
// everything written before it has passed the sinks. It returns the bytes
// that came before the marks and the runner's reply; ok is false when the
// runner did not answer (dead, or hung and now killed).
func (r *Runner) fence(stopThreads bool) (late int64, rep *reply, ok bool) {
	var m [16]byte
	_, _ = rand.Read(m[:])
	marker := []byte("\x1b]nsbox-end-" + hex.EncodeToString(m[:]) + "\x07")
	outSeen, _ := r.stdout.begin(marker, 1, nil)
	errSeen, _ := r.stderr.begin(marker, 1, nil)
	defer func() {
		_, outN, _ := r.stdout.end()
		_, errN, _ := r.stderr.end()
		late = outN + errN
	}()
	if err := writeFrame(r.ctl, request{Fence: true, StopThreads: stopThreads, Marker: string(marker)}); err != nil {
		return 0, nil, false
	}
	t := time.NewTimer(fenceWait)
	defer t.Stop()
	select {
	case rep, open := <-r.replies:
		if !open {
			return 0, nil, false
		}
		if !rep.Unmarked {
			r.waitMarkers(outSeen, errSeen)
		}
		return 0, rep, true
	case <-r.sb.Done():
		return 0, nil, false
	case <-t.C:
		r.setDead(StatusCrashed, "the runner did not answer a fence between cells; the sandbox was killed")
		r.sb.Kill(container.StatusKilled)
		return 0, nil, false
	}
}

// killWriters kills the sandbox's processes that hold the interpreter's
// stdout or stderr, except the interpreter and its ancestors (an init):
// not the process agent and its commands either, whose output goes to
// pipes of their own. They are found by the pipe they hold among every
// process of the sandbox's pid namespace (and the interpreter's
// descendants), not by ancestry alone: an orphan is re-parented to the pid namespace's
// init, which need not be the interpreter (a paced writer's double-forked
// grandchild slipped past the cut so while an init was pid 1, 7a02036).
// The sandbox is frozen meanwhile where it can be, so that a writer
// cannot fork past the kill; where it cannot (v1 without the controller,
// a freeze that timed out) the pass is repeated, once the killed are
// gone, until one finds no writer left. It returns how many it killed.
func (r *Runner) killWriters() (int, error) {
	main := r.interpreter()
	pipes := map[procfd.ID]bool{}
	for _, fd := range []string{"1", "2"} {
		if id, ok := procfd.Of(fmt.Sprintf("/proc/%d/fd/%s", main, fd)); ok {
			pipes[id] = true
		}
	}
	if len(pipes) == 0 {
		return 0, errors.New("the interpreter's output is gone")
	}
	spare := map[int]bool{}
	for p := main; p > 0 && !spare[p]; p = procfd.Parent(p) {
		spare[p] = true
	}
	killed := map[int]bool{}
	for {
		frozen := r.sb.Pause() == nil
		fresh, err := r.killPass(pipes, spare, killed)
		if frozen {
			_ = r.sb.Resume()
		}
		if err != nil || frozen || len(fresh) == 0 {
			return len(killed), err
		}
		// Unfrozen, a writer killed in a fork leaves its child, which
		// shows once the fork is done: when the writer is gone.
		deadline := time.Now().Add(fenceWait)
		for _, pid := range fresh {
			for !procfd.Gone(pid) {
				if time.Now().After(deadline) {
					return len(killed), fmt.Errorf("writer %d did not die", pid)
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
}

// interpreter is the interpreter's host pid: the sandbox's main process,
// or under an init (a reaper as pid 1, which holds no copy of the output)
// the sandbox's process with the pid in it that the interpreter gave in
// its ready frame.
func (r *Runner) interpreter() int {
	main := r.sb.Pid()
	if r.nspid <= 1 {
		return main
	}
	pids, _ := procfd.Namespace(main)
	for _, p := range pids {
		if procfd.NSPid(p) == r.nspid {
			return p
		}
	}
	return main
}

// killPass SIGKILLs the sandbox's processes that hold one of pipes and are
// neither spared nor killed already, and adds them to killed; it returns
// them.
func (r *Runner) killPass(pipes map[procfd.ID]bool, spare, killed map[int]bool) ([]int, error) {
	pids, err := procfd.Namespace(r.sb.Pid())
	if err != nil {
		return nil, fmt.Errorf("list the sandbox's processes: %w", err)
	}
	// And the interpreter's descendants, should one be in a namespace below.
	pids = append(pids, procfd.Descendants(r.sb.Pid())...)
	var fresh []int
	for _, pid := range pids {
		if spare[pid] || killed[pid] {
			continue
		}
		// A frozen process takes SIGKILL; ESRCH is one that died meanwhile.
		if err := killHolder(pid, pipes); err == nil {
			killed[pid] = true
			fresh = append(fresh, pid)
		} else if !errors.Is(err, unix.ESRCH) && !errors.Is(err, errNotWriter) {
			return fresh, fmt.Errorf("kill writer %d: %w", pid, err)
		}
	}
	return fresh, nil
}

var errNotWriter = errors.New("holds none of the pipes")

// killHolder SIGKILLs pid if it holds one of pipes, through a pidfd taken
// before the look, so that a pid that exited and was reused meanwhile (by
// a process outside the sandbox, when it is not frozen) is never signalled
// (before 5.3, without pidfds, by its pid: doctor warns of that race).
func killHolder(pid int, pipes map[procfd.ID]bool) error {
	fd, err := unix.PidfdOpen(pid, 0)
	byPid := errors.Is(err, unix.ENOSYS)
	if err != nil && !byPid {
		return err
	}
	if !byPid {
		defer unix.Close(fd)
	}
	if !procfd.Holds(pid, pipes) {
		return errNotWriter
	}
	if byPid {
		return unix.Kill(pid, unix.SIGKILL)
	}
	return unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
}
