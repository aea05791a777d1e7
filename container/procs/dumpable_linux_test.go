package procs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/container/runner"
)

// probe is Python that tries, as same-uid code in the sandbox, to take
// over the processes named in argv: open /proc/PID/mem read-write and
// PTRACE_ATTACH (PTRACE_DETACH after one that worked). It prints one line
// per attempt: "mem PID ok|EPERM..." and "ptrace PID ok|errno".
const probe = `
import os, sys, ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
for pid in PIDS:
    try:
        os.close(os.open('/proc/%d/mem' % pid, os.O_RDWR))
        print('mem', pid, 'ok')
    except OSError as e:
        print('mem', pid, errno.errorcode[e.errno])
    if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
        os.waitpid(pid, 0x40000000)  # __WALL
        libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH
        print('ptrace', pid, 'ok')
    else:
        print('ptrace', pid, errno.errorcode[ctypes.get_errno()])
`

// TestAgentAndRunnerNotDumpable attempts issue 35's take-over: a cell
// (running in the runner) opens the agent's memory for writing and
// attaches to it with ptrace; a command (a child of the agent) does the
// same to the agent and to the runner. Both are non-dumpable, so each
// open is refused (EACCES); ptrace is refused by the seccomp filter as
// well (EPERM), which the test checks stays so. The cell runs right after
// StartAgent: the runner holds it until the agent is non-dumpable.
func TestAgentAndRunnerNotDumpable(t *testing.T) {
	r, a := startAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	res, err := r.Exec(ctx, runner.ExecRequest{Code: strings.Replace(probe, "PIDS", fmt.Sprintf("[%d]", a.Pid()), 1)})
	if err != nil {
		t.Fatalf("cell: %v", err)
	}
	want := fmt.Sprintf("mem %d EACCES\nptrace %d EPERM\n", a.Pid(), a.Pid())
	if got := string(res.Stdout); got != want {
		t.Errorf("a cell attacking the agent: got %q (stderr %q), want %q", got, res.Stderr, want)
	}

	// A command: its parent is the agent, whose parent is the runner.
	code := strings.Replace(probe, "PIDS", "[os.getppid(), int(open('/proc/%d/stat' % os.getppid()).read().rsplit(')', 1)[1].split()[1])]", 1)
	o := collect(t, start(t, a, procs.Config{Cmd: "python3", Args: []string{"-c", code}}))
	lines := strings.Split(strings.TrimSpace(o.stdout.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("a command attacking the agent and the runner: stdout %q stderr %q", o.stdout.String(), o.stderr.String())
	}
	for _, l := range lines {
		if strings.HasSuffix(l, " ok") {
			t.Errorf("a command attacking the agent and the runner: %q", l)
		}
	}
}
