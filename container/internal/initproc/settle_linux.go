package initproc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/nsbox/nsbox/cgroup"
)

// InitTasks is what an init that stays a sandbox's pid 1 may use of its
// pids limit while it starts (the Go runtime's threads: 7 or 8 measured),
// on top of the command's; Settle then makes the limit the command's
// exactly. A zygote's init execs the zygote and adds none.
const InitTasks = 10

// WithInitTasks is l with an init's tasks added to a pids limit.
func WithInitTasks(l cgroup.Limits) cgroup.Limits {
	if l.Pids > 0 {
		l.Pids += InitTasks
	}
	return l
}

// Settle learns the host pid of the command init started (none when it
// has ended already), and sets the sandbox's pids limit to the command's,
// pids, plus the threads init has: a limit of 16 leaves the command 16
// processes and threads, as when it was pid 1 itself. For an init that
// said Started, right after.
func (p *Proc) Settle(pids int64) error {
	// The command is init's only child yet, of the thread that forked it:
	// its locked main thread, whose tid is init's pid, else another.
	init := p.Process.Pid
	threads, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", init))
	if err != nil {
		return fmt.Errorf("sandbox init's threads: %w", err)
	}
	tids := []string{strconv.Itoa(init)}
	for _, t := range threads {
		tids = append(tids, t.Name())
	}
	for _, tid := range tids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", init, tid))
		if f := strings.Fields(string(b)); len(f) > 0 {
			p.cmd, _ = strconv.Atoi(f[0])
			break
		}
	}
	if pids <= 0 {
		return nil
	}
	if err := p.Cg.SetLimits(cgroup.Limits{Pids: pids + int64(len(threads))}); err != nil {
		return fmt.Errorf("pids limit: %w", err)
	}
	return nil
}

// CommandPid is the command's host pid: init's child once it started one
// (init stays pid 1), else init's, which the command became.
func (p *Proc) CommandPid() int {
	if p.cmd > 0 {
		return p.cmd
	}
	return p.Process.Pid
}

// CommandWait waits for init (Wait) and returns the command's status: the
// one init reported, else init's own.
func (p *Proc) CommandWait() (syscall.WaitStatus, bool) {
	ps := p.Wait()
	if ws, ok := p.CommandStatus(); ok {
		return ws, true
	}
	if ps != nil {
		ws, ok := ps.Sys().(syscall.WaitStatus)
		return ws, ok
	}
	return 0, false
}
