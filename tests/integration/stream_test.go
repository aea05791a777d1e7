package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
)

// streamCode prints a line every half second: a caller that streams must
// see each line as it is printed, not the three at the end.
const streamCode = "import time\nfor i in range(3):\n    print(i)\n    time.sleep(0.5)\n"

// checkStreamed runs streamCode with run (which streams events to its
// callback) and checks that the lines arrived at least 0.4 s apart.
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
	if res.Status != agentapi.StatusOK || out.String() != "0\n1\n2\n" || len(arrived) != 3 {
		t.Fatalf("result %+v, streamed stdout %q", res, out.String())
	}
	for i := 1; i < len(arrived); i++ {
		if gap := arrived[i].Sub(arrived[i-1]); gap < 400*time.Millisecond {
			t.Errorf("line %d came %v after line %d, want >= 0.4 s (the output was held back)", i, gap, i-1)
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
