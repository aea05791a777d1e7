package procs

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

// DefaultOutputBytes is a command's output cap per stream unless
// LimitOutput sets another: the most a session's runner may write in its
// whole life (session.Config.OutputBytes), and the most a run may ask for.
const DefaultOutputBytes = 64 << 20

// StatusOutputLimit is the Status of a process ended for passing its
// output cap: runner.StatusOutputLimit, the runs' verdict.
const StatusOutputLimit = "output_limit"

// LimitOutput caps each process's output at n bytes per stream (stdout,
// stderr; n <= 0: DefaultOutputBytes), for processes started afterwards.
// The host counts what the agent sends, so code that took the agent over
// cannot lift it: past it the process's group is killed, no byte past the
// cap reaches a subscriber, and its end says StatusOutputLimit.
func (a *Agent) LimitOutput(n int64) {
	if n <= 0 {
		n = DefaultOutputBytes
	}
	a.mu.Lock()
	a.outCap = n
	a.mu.Unlock()
}

// budget is a process's output so far against its cap.
type budget struct {
	cap  int64    // 0: none
	n    [2]int64 // stdout, stderr
	over string   // the stream that passed cap ("": none)
}

// take returns what of b (stream i: 0 stdout, 1 stderr) fits the cap,
// and whether this call passed it; a.mu is held.
func (bu *budget) take(i int, b []byte) ([]byte, bool) {
	if bu.over != "" {
		return nil, false
	}
	if bu.cap <= 0 || bu.n[i]+int64(len(b)) <= bu.cap {
		bu.n[i] += int64(len(b))
		return b, false
	}
	keep := bu.cap - bu.n[i]
	bu.n[i] = bu.cap
	bu.over = [2]string{"stdout", "stderr"}[i]
	return b[:keep], true
}

// end is the End of a process whose output passed its cap.
func (bu *budget) end() *End {
	msg := fmt.Sprintf("%s: %s passed its cap of %d bytes; the process was killed", StatusOutputLimit, bu.over, bu.cap)
	return &End{ExitCode: -1, Status: StatusOutputLimit, Error: msg}
}

// kill ends pid's group for passing its cap. It runs beside the reader
// (whose replies it waits for), and a process already gone is no error.
func (a *Agent) kill(pid uint32) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = a.Signal(ctx, Selector{Pid: pid}, syscall.SIGKILL)
}
