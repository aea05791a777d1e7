package load

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/tests/internal/testdaemon"
)

// drainQueued: SIGTERM with two runs in flight and 50 queued. Every
// queued run must be answered 503 unavailable with Retry-After, none may
// start after the signal, and the two in flight run to completion within
// the grace. The two hold their slots until the test lets them go (a
// file in a dataset, written after the 50 answers), so nothing but the
// drain can decide the queued runs' fate.
func (s *suite) drainQueued(t *testing.T, sc *scenario) {
	const inFlight, queued = 2, 50
	gate := filepath.Join(t.TempDir(), "gate")
	if err := os.Mkdir(gate, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(t.TempDir(), "nsbox.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("[[datasets]]\nname = \"gate\"\npath = %q\n", gate)), 0o644); err != nil {
		t.Fatal(err)
	}
	d := sc.start("--config", conf, "--max-concurrent", fmt.Sprint(inFlight), "--queue", "64", "--shutdown-grace", "2m")
	ctx := context.Background()

	type answer struct {
		res *agentapi.RunResult
		err error
		lat time.Duration
	}
	blockers := make(chan answer, inFlight)
	running := make(chan struct{}, inFlight)
	for range inFlight {
		go func() {
			cl, closeIdle := sc.client()
			defer closeIdle()
			var once sync.Once
			t0 := time.Now()
			res, err := cl.RunStream(ctx, &agentapi.RunRequest{Datasets: []string{"gate"},
				Argv: []string{"sh", "-c", "echo running; while [ ! -e /mnt/gate/go ]; do sleep 0.05; done; echo done"}},
				func(ev agentapi.Event) {
					if ev.Type == agentapi.EventStdout {
						once.Do(func() { running <- struct{}{} })
					}
				})
			blockers <- answer{res, err, time.Since(t0)}
		}()
	}
	timeout := time.After(time.Minute)
	for range inFlight {
		select {
		case <-running:
		case <-timeout:
			t.Fatal("the runs to hold the slots did not start in a minute")
		}
	}

	answers := make(chan answer, queued)
	cl, closeIdle := sc.client()
	defer closeIdle()
	for i := range queued {
		go func() {
			res, err := cl.Run(ctx, &agentapi.RunRequest{Argv: []string{"echo", fmt.Sprint(i)}})
			answers <- answer{res: res, err: err}
		}()
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		info, err := d.Client.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.InFlight == inFlight && info.Queued == queued {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d in flight, %d queued after a minute; want %d and %d", info.InFlight, info.Queued, inFlight, queued)
		}
	}
	logged := len(d.Log.String())

	// Nothing can leave the queue now but the drain: the slots are held
	// until the gate file exists.
	t0 := time.Now()
	if err := d.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var last time.Duration
	refused := 0
	for range queued {
		var a answer
		select {
		case a = <-answers:
		case <-time.After(time.Minute):
			t.Fatal("queued runs still unanswered a minute after SIGTERM")
		}
		lat := time.Since(t0)
		last = lat
		var ae *agentapi.Error
		switch {
		case a.err == nil:
			a.err = fmt.Errorf("a run queued at SIGTERM started after it: %s %q", a.res.Status, a.res.Stdout)
		case !errors.As(a.err, &ae):
		case ae.Status != http.StatusServiceUnavailable || ae.Code != agentapi.CodeUnavailable || ae.RetryAfter <= 0:
			a.err = fmt.Errorf("a run queued at SIGTERM: %d %s %q, Retry-After %v; want 503 unavailable with Retry-After", ae.Status, ae.Code, ae.Message, ae.RetryAfter)
		default:
			a.err = nil
			refused++
		}
		sc.record(lat, a.err)
	}
	sc.row.note("%d of %d queued runs answered 503 with Retry-After, the last %d ms after SIGTERM", refused, queued, last.Milliseconds())

	if err := os.WriteFile(filepath.Join(gate, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	completed := 0
	for range inFlight {
		a := <-blockers
		if a.err == nil && (a.res.Status != agentapi.StatusOK || !strings.HasSuffix(a.res.Stdout, "done\n")) {
			a.err = fmt.Errorf("a run in flight at SIGTERM: %s stdout %q, want ok to its end", a.res.Status, a.res.Stdout)
		}
		if a.err == nil {
			completed++
		}
		sc.record(a.lat, a.err)
	}
	<-d.Exited
	if d.ExitErr != nil {
		t.Errorf("daemon exit after the drain: %v", d.ExitErr)
	}
	started := strings.Count(d.Log.String()[logged:], "run started")
	if started != 0 {
		t.Errorf("%d runs started after SIGTERM, want none", started)
	}
	sc.row.note("%d of %d in flight ran to completion; %d started after the signal", completed, inFlight, started)
	if cgroups, mounts := testdaemon.LeftoverCgroups(t, d.CgroupName), testdaemon.Mounts(t, d.RunDir); len(cgroups)+len(mounts) > 0 {
		t.Errorf("the drained daemon left cgroups %q, mounts %q", cgroups, mounts)
	}
	// finish checks a daemon that serves: the next one on the same paths.
	sc.restart()
}
