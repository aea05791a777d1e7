package load

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/tests/internal/testdaemon"
)

// op is one sort of request in the sustained mix.
type op struct {
	name   string
	weight int
	do     func(ctx context.Context, cl *client.Client) error
}

// run expects req to end with status and stdout containing out.
func run(req *agentapi.RunRequest, status, out string) func(context.Context, *client.Client) error {
	return func(ctx context.Context, cl *client.Client) error {
		res, err := retry429(func() (*agentapi.RunResult, error) { return cl.Run(ctx, req) })
		if err != nil {
			return err
		}
		if res.Status != status || !strings.Contains(res.Stdout, out) {
			return fmt.Errorf("%.60q: status %s stdout %.100q error %q; want %s with %q", req.Code+strings.Join(req.Argv, " "), res.Status, res.Stdout, res.Error, status, out)
		}
		return nil
	}
}

func mixOps() []op {
	python := func(code string, lim *agentapi.Limits) *agentapi.RunRequest {
		return &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: code, Limits: lim}
	}
	return []op{
		{"python", 30, run(python("print(sum(range(1000)))", nil), agentapi.StatusOK, "499500")},
		{"python+file", 10, run(&agentapi.RunRequest{Language: agentapi.LanguagePython, Code: "print(open('in.txt').read().upper())",
			Files: []agentapi.File{{Path: "in.txt", Text: "input"}}}, agentapi.StatusOK, "INPUT")},
		{"python cold", 5, run(python("print('cold')", &agentapi.Limits{MemoryBytes: 200 << 20}), agentapi.StatusOK, "cold")},
		{"bash", 5, run(&agentapi.RunRequest{Language: agentapi.LanguageBash, Code: "for i in 1 2 3; do echo -n $i; done"}, agentapi.StatusOK, "123")},
		{"argv", 5, run(&agentapi.RunRequest{Argv: []string{"sh", "-c", "echo argv; sleep 0.01 &"}}, agentapi.StatusOK, "argv")},
		{"exception", 5, run(python("1/0", nil), agentapi.StatusException, "")},
		{"timeout", 3, run(python("while True: pass", &agentapi.Limits{TimeoutMs: 300}), agentapi.StatusTimeout, "")},
		{"oom", 3, run(python("x = []\nwhile True: x.append(bytearray(1 << 20))", &agentapi.Limits{MemoryBytes: 64 << 20}), agentapi.StatusOOM, "")},
		{"flood", 4, run(python("while True: print('y' * 4096)", &agentapi.Limits{TimeoutMs: 2000, OutputBytes: 64 << 10}), agentapi.StatusOutputLimit, "yyyy")},
		{"stream", 5, stream},
		{"session", 10, session},
		{"info", 15, func(ctx context.Context, cl *client.Client) error { _, err := cl.Info(ctx); return err }},
	}
}

func stream(ctx context.Context, cl *client.Client) error {
	var got strings.Builder
	res, err := retry429(func() (*agentapi.RunResult, error) {
		got.Reset()
		return cl.RunStream(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: "for i in range(5): print(i, flush=True)"},
			func(ev agentapi.Event) {
				if ev.Type == agentapi.EventStdout {
					got.WriteString(ev.Data)
				}
			})
	})
	if err != nil {
		return err
	}
	if res.Status != agentapi.StatusOK || got.String() != "0\n1\n2\n3\n4\n" {
		return fmt.Errorf("stream: status %s, streamed %q", res.Status, got.String())
	}
	return nil
}

func session(ctx context.Context, cl *client.Client) error {
	s, err := retry429(func() (*agentapi.Session, error) {
		return cl.CreateSession(ctx, &agentapi.SessionRequest{Files: []agentapi.File{{Path: "n.txt", Text: "1"}}})
	})
	if err != nil {
		return err
	}
	defer cl.DeleteSession(context.WithoutCancel(ctx), s.ID)
	for i, code := range []string{"x = int(open('n.txt').read())", "x += 1", "x * 10"} {
		res, err := retry429(func() (*agentapi.RunResult, error) { return cl.Exec(ctx, s.ID, &agentapi.ExecRequest{Code: code}) })
		if err != nil {
			return err
		}
		if res.Status != agentapi.StatusOK || (i == 2 && res.Value != "20") {
			return fmt.Errorf("session exec %q: status %s value %q", code, res.Status, res.Value)
		}
	}
	return nil
}

// drive makes n requests of the mix from conc clients, recording them
// when rec is set.
func (sc *scenario) drive(n, conc int, rec bool) {
	var deck []op // each op as many times as its weight
	for _, o := range mixOps() {
		for range o.weight {
			deck = append(deck, o)
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, closeIdle := sc.client()
			defer closeIdle()
			for next.Add(1) <= int64(n) {
				o := deck[rand.IntN(len(deck))]
				t0 := time.Now()
				err := o.do(context.Background(), cl)
				if rec {
					sc.record(time.Since(t0), err)
				} else if err != nil {
					sc.t.Errorf("warm-up %s: %v", o.name, err)
				}
			}
		}()
	}
	wg.Wait()
}

// usage is what must come back after load.
type usage struct{ rss, fds, goroutines int64 }

func (sc *scenario) usage() usage {
	m := sc.d.Metrics(sc.t)
	rss, _ := testdaemon.RSS(sc.d.Pid())
	return usage{rss: rss, fds: int64(m["process_open_fds"]), goroutines: int64(m["go_goroutines"])}
}

// within10 reports whether every figure of u is at most 10% above base's.
func (u usage) within10(base usage) bool {
	return u.rss*10 <= base.rss*11 && u.fds*10 <= base.fds*11 && u.goroutines*10 <= base.goroutines*11
}

// mixed: the sustained mix at concurrency 8 over 4 run slots (so that
// the queue fills and clients retry 429s), then RSS, fds and goroutines
// must come back within 10% of where they were after a short warm-up
// (pools, caches and the runtime's first allocations are not leaks).
func (s *suite) mixed(t *testing.T, sc *scenario) {
	d := sc.start("--max-concurrent", "4")
	sc.drive(2*s.scale.conc, s.scale.conc, false)
	d.Settle(t)
	base := sc.usage()
	t0 := time.Now()
	sc.drive(s.scale.mixed, s.scale.conc, true)
	sc.row.note("%.1f req/s", float64(s.scale.mixed)/time.Since(t0).Seconds())
	deadline := time.Now().Add(30 * time.Second)
	var end usage
	for {
		d.Settle(t)
		end = sc.usage()
		if end.within10(base) || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	sc.row.note("RSS %d→%d MiB, fds %d→%d, goroutines %d→%d", base.rss/mib, end.rss/mib, base.fds, end.fds, base.goroutines, end.goroutines)
	if !end.within10(base) {
		t.Errorf("after %d requests the daemon holds more than 10%% above its start: %+v, then %+v", s.scale.mixed, base, end)
	}
}
