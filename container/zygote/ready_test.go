package zygote

import "testing"

// ZygoteReady reports the state and wakes its watchers at each change of
// state, and stops handing out a channel once the zygote will not start
// again.
func TestZygoteReadyFollowsState(t *testing.T) {
	sl := &slot{p: Profile{Rootfs: "r"}, state: "starting", changed: make(chan struct{})}
	s := &Set{slots: []*slot{sl}}
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}

	ready, ch := s.ZygoteReady("r")
	if ready || ch == nil {
		t.Fatalf("starting: ready %v, channel %v", ready, ch)
	}
	sl.set(nil, "", "restarting", "start failed", nil)
	if !closed(ch) {
		t.Fatal("no wake-up at starting -> restarting")
	}
	_, ch = s.ZygoteReady("r")
	sl.set(nil, "", "restarting", "start failed again", nil)
	if closed(ch) {
		t.Fatal("a wake-up without a change of state")
	}
	sl.set(nil, "/dir", "ready", "", nil)
	if !closed(ch) {
		t.Fatal("no wake-up at restarting -> ready")
	}
	if ready, _ := s.ZygoteReady("r"); !ready {
		t.Fatal("not ready after set ready")
	}
	for _, state := range []string{"unused", "closed"} {
		sl.set(nil, "", state, "", nil)
		if ready, ch := s.ZygoteReady("r"); ready || ch != nil {
			t.Errorf("%s: ready %v, channel %v; want false, nil", state, ready, ch)
		}
	}
	if ready, ch := s.ZygoteReady("other"); ready || ch != nil {
		t.Errorf("rootfs without a zygote: ready %v, channel %v", ready, ch)
	}
}
