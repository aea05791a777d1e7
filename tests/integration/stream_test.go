package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
)

// streamCode prints a line every half second, each with the time it was
// printed (the sandbox's wall clock is the host's): a caller that streams
// must see each line before the next is printed, not the three at the end.
const streamCode = "import time\nfor i in range(3):\n    print(i, repr(time.time()))\n    time.sleep(0.5)\n"

// checkStreamed runs streamCode with run (which streams events to its
// callback) and checks that each line arrived before the cell printed the
// next: output held back until the end arrives after all three were
// printed. A busy machine only fails it if it holds the caller's reading
// back for the whole half second between two prints.
func checkStreamed(t *testing.T, run func(onEvent func(agentapi.Event)) (*agentapi.RunResult, error)) {
	t.Helper()
	var (
		out     strings.Builder
		arrived []time.Time // when line i's newline came
	)
	res, err := run(func(ev agentapi.Event) {
		if ev.Type != agentapi.EventStdout {
			return
		}
		now := time.Now()
		for range strings.Count(ev.Data, "\n") {
			arrived = append(arrived, now)
		}
		out.WriteString(ev.Data)
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if res.Status != agentapi.StatusOK || len(lines) != 3 || len(arrived) != 3 {
		t.Fatalf("result %+v, streamed stdout %q", res, out.String())
	}
	printed := make([]time.Time, len(lines))
	for i, l := range lines {
		var n int
		var at float64
		if _, err := fmt.Sscanf(l, "%d %g", &n, &at); err != nil || n != i {
			t.Fatalf("line %d is %q, want %d and a time", i, l, i)
		}
		printed[i] = time.Unix(0, int64(at*1e9))
	}
	for i := 0; i+1 < len(lines); i++ {
		if !arrived[i].Before(printed[i+1]) {
			t.Errorf("line %d came %v after line %d was printed (the output was held back)", i, arrived[i].Sub(printed[i+1]), i+1)
		}
	}
}

// checkStreamedEverywhere checks streaming in a one-shot run and in a
// session exec on rootfs (empty: the daemon's default).
func checkStreamedEverywhere(t *testing.T, d *daemon, rootfs string) {
	t.Helper()
	ctx := context.Background()
	t.Run("run", func(t *testing.T) {
		checkStreamed(t, func(on func(agentapi.Event)) (*agentapi.RunResult, error) {
			return d.client.RunStream(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Rootfs: rootfs, Code: streamCode}, on)
		})
	})
	t.Run("session", func(t *testing.T) {
		id := newSession(t, d, &agentapi.SessionRequest{Rootfs: rootfs})
		checkStreamed(t, func(on func(agentapi.Event)) (*agentapi.RunResult, error) {
			return d.client.ExecStream(ctx, id, &agentapi.ExecRequest{Code: streamCode}, on)
		})
	})
}

// TestPythonOutputStreams checks that a Python cell's output reaches the
// caller as the cell writes it (the runner's stdout is a pipe, which Python
// would buffer), for an interpreter started cold.
func TestPythonOutputStreams(t *testing.T) {
	d := startDaemon(t)
	checkStreamedEverywhere(t, d, "")
}

// TestPythonOutputStreamsZygote is TestPythonOutputStreams for the
// interpreters a zygote forks (whose stdout the zygote set up).
func TestPythonOutputStreamsZygote(t *testing.T) {
	name := dataSciRootfs(t)
	d := startDaemon(t, "--config", writeConf(t, fmt.Sprintf("[zygote]\nrootfs = [%q]\n", name)))
	d.waitZygote(t, 0)
	checkStreamedEverywhere(t, d, name)
	d.checkForked(t, 2) // the run and the session
}
