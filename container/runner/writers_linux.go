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

// killWriters kills the processes the interpreter started (its
// descendants) that hold its stdout or stderr: not the process agent and
// its commands, whose output goes to pipes of their own. The sandbox is
// frozen meanwhile where it can be, so that a writer cannot fork past the kill. It
// returns how many it killed.
func (r *Runner) killWriters() (int, error) {
	main := r.sb.Pid()
	pipes := map[procfd.ID]bool{}
	for _, fd := range []string{"1", "2"} {
		if id, ok := procfd.Of(fmt.Sprintf("/proc/%d/fd/%s", main, fd)); ok {
			pipes[id] = true
		}
	}
	if len(pipes) == 0 {
		return 0, errors.New("the interpreter's output is gone")
	}
	// Without a freezer (v1 without the controller) the kill goes on
	// unfrozen: a writer that forks meanwhile is the fence's to find.
	if r.sb.Pause() == nil {
		defer func() { _ = r.sb.Resume() }()
	}
	n := 0
	for _, pid := range procfd.Descendants(main) {
		if !procfd.Holds(pid, pipes) {
			continue
		}
		// A frozen process takes SIGKILL; ESRCH is one that died meanwhile.
		if err := unix.Kill(pid, unix.SIGKILL); err == nil {
			n++
		} else if !errors.Is(err, unix.ESRCH) {
			return n, fmt.Errorf("kill writer %d: %w", pid, err)
		}
	}
	return n, nil
}
