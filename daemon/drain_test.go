package daemon

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/httpkit"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// TestDrainAnswersQueuedRuns: at Drain (SIGTERM) the runs queued for a
// slot and a batch's runs waiting for one are answered at once with
// ErrShuttingDown, which the API sends as 503 unavailable with
// Retry-After, not left to start as slots free up nor cancelled into a
// 500 at the grace's end; the run in flight runs to its end, and no other
// run reaches the engine.
func TestDrainAnswersQueuedRuns(t *testing.T) {
	r, started, release := gatedRunner(8)
	d, _ := newTestDaemon(t, r, func(c *Config) { c.MaxConcurrent, c.QueueSize = 1, 3 })
	inFlight := make(chan error, 1)
	go func() {
		res, err := d.Run(context.Background(), &agentapi.RunRequest{Argv: []string{"in-flight"}}, RunOptions{})
		if err == nil && res.Status != agentapi.StatusOK {
			err = errors.New("the run in flight ended " + res.Status)
		}
		inFlight <- err
	}()
	<-started
	queued := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := d.Run(context.Background(), &agentapi.RunRequest{Argv: []string{"queued"}}, RunOptions{})
			queued <- err
		}()
	}
	batch := make(chan []error, 1)
	go func() {
		var errs []error
		_, err := d.RunBatch(context.Background(), &agentapi.BatchRequest{Runs: []agentapi.RunRequest{{Argv: []string{"b0"}}, {Argv: []string{"b1"}}}},
			BatchOptions{OnItem: func(_ int, _ *agentapi.RunResult, err error) { errs = append(errs, err) }})
		batch <- append(errs, err)
	}()
	for deadline := time.Now().Add(10 * time.Second); d.adm.Queued() != 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("queued %d, want 3", d.adm.Queued())
		}
	}

	d.Drain()
	timeout := time.After(10 * time.Second)
	for range 3 {
		select {
		case err := <-queued:
			wantDrained(t, "a queued run", err)
		case <-timeout:
			t.Fatal("queued runs not answered 10 s after the drain began")
		}
	}
	select {
	case errs := <-batch:
		if len(errs) != 3 || errs[2] != nil {
			t.Fatalf("the batch: %v, want two run errors and no batch error", errs)
		}
		for _, err := range errs[:2] {
			wantDrained(t, "a batch's run", err)
		}
	case <-timeout:
		t.Fatal("the batch not answered 10 s after the drain began")
	}
	_, err := d.Run(context.Background(), &agentapi.RunRequest{Argv: []string{"late"}}, RunOptions{})
	wantDrained(t, "a run asked for after the drain began", err)

	close(release)
	if err := <-inFlight; err != nil {
		t.Errorf("the run in flight: %v, want it run to its end", err)
	}
	select {
	case id := <-started:
		t.Errorf("run %s reached the engine after the drain began", id)
	default:
	}
}

// wantDrained checks that err is ErrShuttingDown and that the API answers
// it 503 unavailable with a Retry-After.
func wantDrained(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrShuttingDown) || !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("%s: %v, want ErrShuttingDown (unavailable)", what, err)
		return
	}
	status, code := httpkit.ToHTTP(err)
	w := httptest.NewRecorder()
	httpkit.RetryAfter(w, status, err)
	if status != http.StatusServiceUnavailable || code != agentapi.CodeUnavailable || w.Header().Get("Retry-After") == "" {
		t.Errorf("%s: answered %d %s, Retry-After %q; want 503 unavailable with Retry-After", what, status, code, w.Header().Get("Retry-After"))
	}
}
