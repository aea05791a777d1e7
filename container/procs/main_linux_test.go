package procs_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/internal/agenttest"
	"github.com/nsbox/nsbox/container/internal/testenv"
	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/container/runner"
)

func TestMain(m *testing.M) { agenttest.Main(m) }

// startAgent starts a runner in a fresh sandbox and its agent; both end at
// cleanup.
func startAgent(t testing.TB) (*runner.Runner, *procs.Agent) {
	t.Helper()
	return agenttest.Start(t, testenv.Rootfs(t))
}

func start(t testing.TB, a *procs.Agent, cfg procs.Config) *procs.Process {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := a.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start(%+v): %v", cfg, err)
	}
	return p
}

func sh(script string) procs.Config {
	return procs.Config{Cmd: "/bin/sh", Args: []string{"-c", script}}
}

// output holds what a subscription saw.
type output struct {
	stdout, stderr bytes.Buffer
	start          *procs.Start
	end            *procs.End
	err            error
}

// collect reads p's events until its end (or a minute).
func collect(t testing.TB, p *procs.Process) *output {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := &output{}
	for {
		ev, err := p.Next(ctx)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				o.err = err
			}
			return o
		}
		switch {
		case ev.Start != nil:
			o.start = ev.Start
		case ev.Data != nil:
			o.stdout.Write(ev.Data.Stdout)
			o.stderr.Write(ev.Data.Stderr)
		case ev.End != nil:
			o.end = ev.End
		}
	}
}
