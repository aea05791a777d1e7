package daemon

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// The result budget: a run whose output caps do not fit beside an answer
// not yet taken waits for it, holding its slot but not reaching the
// engine; a run at the default caps is not held up; at the drain the
// waiting run gets unavailable.
func TestResultBudget(t *testing.T) {
	const capBytes = 32 << 20 // per stream: 64 MiB reserved, the whole budget
	out := bytes.Repeat([]byte("x"), 4<<20)
	started := make(chan string, 8)
	r := &fakeRunner{fn: func(_ context.Context, spec container.Spec) (*container.Result, error) {
		started <- spec.Argv[0]
		return &container.Result{ID: spec.ID, Status: container.StatusOK, Stdout: out, StdoutBytes: int64(len(out))}, nil
	}}
	d, _ := newTestDaemon(t, r, func(c *Config) { c.MaxConcurrent, c.ResultBytes = 4, 64<<20 })
	big := func(name string) *agentapi.RunRequest {
		return &agentapi.RunRequest{Argv: []string{name}, Limits: &agentapi.Limits{OutputBytes: capBytes}}
	}

	// A's answer is not taken until take is called (at the test's end at
	// the latest, so that a failure does not leave Close waiting).
	unread := func(name string, done chan<- error) (take func()) {
		answering, taken := make(chan struct{}), make(chan struct{})
		var once sync.Once
		take = func() { once.Do(func() { close(taken) }) }
		t.Cleanup(take)
		go func() {
			_, err := d.Run(context.Background(), big(name), RunOptions{OnResult: func(*agentapi.RunResult) {
				close(answering)
				<-taken
			}})
			done <- err
		}()
		<-answering
		return take
	}
	aDone := make(chan error, 1)
	take := unread("a", aDone)
	if got := <-started; got != "a" {
		t.Fatalf("started %q, want a", got)
	}
	if n := d.results.InUse(); n != int64(len(out)) {
		t.Fatalf("A's answer holds %d bytes of the budget, want its output's %d (not its caps)", n, len(out))
	}

	bDone := make(chan error, 1)
	go func() {
		_, err := d.Run(context.Background(), big("b"), RunOptions{})
		bDone <- err
	}()
	// A run at the default caps goes through beside A's unread answer.
	if _, err := d.Run(context.Background(), &agentapi.RunRequest{Argv: []string{"c"}}, RunOptions{}); err != nil {
		t.Fatalf("a run at the default caps: %v", err)
	}
	if got := <-started; got != "c" {
		t.Fatalf("started %q beside A's unread answer, want only c (b's caps do not fit)", got)
	}
	take()
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	if got := <-started; got != "b" {
		t.Fatalf("started %q once A's answer was taken, want b", got)
	}
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
	if n := d.results.InUse(); n != 0 {
		t.Fatalf("%d bytes of the budget held once every answer was written", n)
	}

	// At the drain, a run waiting for room gets unavailable.
	take = unread("d", aDone)
	<-started
	go func() {
		_, err := d.Run(context.Background(), big("e"), RunOptions{})
		bDone <- err
	}()
	for d.adm.InFlight() != 1 { // e holds its slot, waiting for room
		runtime.Gosched()
	}
	d.Drain()
	if err := <-bDone; !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("a run waiting for room at the drain: %v, want unavailable", err)
	}
	take()
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-started:
		t.Fatalf("%q reached the engine after the drain", got)
	default:
	}
}
