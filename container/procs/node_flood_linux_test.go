package procs_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/internal/testenv"
	"github.com/nsbox/nsbox/container/procs"
)

// A Node command writing to stdout in a loop that never yields streams its
// output at the host's pace: 64 MiB arrive and the sandbox's memory stays
// small. Node's own pipe writes do not block, so before the agent's
// preload the first 64 KiB arrived and the rest waited in Node's memory
// until the sandbox's memory limit killed it ("signal: killed").
func TestNodeFloodStreams(t *testing.T) {
	t.Setenv("NSBOX_TEST_ROOTFS", testenv.NodeRootfs(t))
	r, a := startAgent(t)
	p := start(t, a, procs.Config{Cmd: "node", Args: []string{"-e", `for(;;)process.stdout.write("x".repeat(65536))`}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var n int64
	for n < 64<<20 {
		ev, err := p.Next(ctx)
		if err != nil {
			t.Fatalf("after %d bytes: %v", n, err)
		}
		if ev.Data != nil {
			n += int64(len(ev.Data.Stdout))
		}
		if ev.End != nil {
			st, _ := r.Sandbox().Stats()
			t.Fatalf("the flood ended (%s) after %d bytes; oom kills %d, memory peak %d MiB", ev.End.Status, n, st.OOMKills, st.MemoryPeakBytes>>20)
		}
	}
	if err := a.Signal(ctx, procs.Selector{Pid: p.Pid}, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the flood: %v", err)
	}
	st, err := r.Sandbox().Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if st.OOMKills != 0 || st.MemoryPeakBytes > 256<<20 {
		t.Errorf("memory peak %d MiB, %d OOM kills for a streamed flood", st.MemoryPeakBytes>>20, st.OOMKills)
	}
	// The preload keeps a command's own NODE_OPTIONS.
	cfg := procs.Config{Cmd: "node", Args: []string{"-e", `console.log(process.env.NODE_OPTIONS)`}, Env: map[string]string{"NODE_OPTIONS": "--max-old-space-size=64"}}
	o := collect(t, start(t, a, cfg))
	if got := o.stdout.String(); !strings.Contains(got, "--max-old-space-size=64") || o.end == nil || o.end.ExitCode != 0 {
		t.Fatalf("NODE_OPTIONS in the command: %q, end %+v, stderr %q", got, o.end, o.stderr.String())
	}
}
