package daemon

import (
	"context"
	"fmt"
)

// admission bounds concurrency: slots runs at once, queue more waiting.
// A request that finds both full is refused at once (ErrBusy); nothing
// grows without bound.
type admission struct {
	slots chan struct{}
	queue chan struct{}
}

func newAdmission(slots, queue int) *admission {
	return &admission{slots: make(chan struct{}, slots), queue: make(chan struct{}, queue)}
}

// acquire takes a run slot, waiting in the queue if there is room there.
// The returned func gives the slot back.
func (a *admission) acquire(ctx context.Context) (release func(), err error) {
	select {
	case a.slots <- struct{}{}:
		return a.release, nil
	default:
	}
	select {
	case a.queue <- struct{}{}:
	default:
		return nil, ErrBusy
	}
	defer func() { <-a.queue }()
	select {
	case a.slots <- struct{}{}:
		return a.release, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a run slot: %w", context.Cause(ctx))
	}
}

func (a *admission) release() { <-a.slots }

func (a *admission) inFlight() int { return len(a.slots) }
func (a *admission) queued() int   { return len(a.queue) }
