package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/limits"
)

// TestLimitsBelowMinimum: a limit below its row's minimum is a 400 naming
// the field, plain and streamed, before the run takes a slot, a rootfs or
// reaches the engine.
func TestLimitsBelowMinimum(t *testing.T) {
	ts := startServer(t, nil, nil)
	for _, r := range limits.Table {
		below := r.Min / 2
		if r.Unit != limits.Cores {
			below = float64(int64(r.Min) - 1)
		}
		if below <= 0 {
			continue // the minimum is the least positive value: only 0 (absent) is below
		}
		var l agentapi.Limits
		r.SetWire(&l, below)
		field := "limits." + r.Field
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", r.Key, stream), func(t *testing.T) {
				req := &agentapi.RunRequest{Argv: []string{"true"}, Limits: &l}
				var err error
				if stream {
					_, err = ts.client.RunStream(context.Background(), req, func(ev agentapi.Event) {
						t.Errorf("got a stream event %+v; want a 400 before the stream", ev)
					})
				} else {
					_, err = ts.client.Run(context.Background(), req)
				}
				var ae *agentapi.Error
				if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != agentapi.CodeInvalidArgument ||
					!strings.HasPrefix(ae.Message, field+": ") || !strings.Contains(ae.Message, "below the minimum") {
					t.Fatalf("err = %v, want a 400 %q below the minimum", err, field)
				}
			})
		}
	}
	ts.runner.mu.Lock()
	n := len(ts.runner.specs)
	ts.runner.mu.Unlock()
	if n != 0 {
		t.Errorf("the engine got %d runs of refused requests", n)
	}
	if n := ts.store.acquired(); n != 0 {
		t.Errorf("refused requests acquired a rootfs %d times", n)
	}
	// The least value of each limit is admitted.
	var min agentapi.Limits
	for _, r := range limits.Table {
		r.SetWire(&min, r.Min)
	}
	if _, err := ts.client.Run(context.Background(), &agentapi.RunRequest{Argv: []string{"true"}, Limits: &min}); err != nil {
		t.Fatalf("the minimums were refused: %v", err)
	}
	if sp := ts.runner.lastSpec(t); sp.Limits != limits.FromWire(min) {
		t.Errorf("the engine got %+v, want the minimums %+v", sp.Limits, limits.FromWire(min))
	}
}
