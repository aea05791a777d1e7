package session

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/runner"
)

// TestCaptureLoad: a captured session's state and workspace load into
// another; a busy session is not captured (ErrBusy), a paused one is
// thawed for it and paused again, a dead one gives ErrDead; End forgets
// the session and frees its sandbox.
func TestCaptureLoad(t *testing.T) {
	m, name := newManager(t, Config{})
	ctx := context.Background()
	a, b := create(t, m, Options{}), create(t, m, Options{})
	run(t, a, "x = [1, 2]; open('/workspace/f', 'w').write('data')")
	if err := a.Pause(); err != nil {
		t.Fatal(err)
	}
	err := a.Capture(ctx, 0, func(st *runner.State, ws *container.Workspace) error {
		if st.Size() == 0 {
			t.Error("an empty state")
		}
		failed, err := b.Load(ctx, st, func(dst *container.Workspace) error { return ws.CopyTo(dst.Workspace) })
		if len(failed) != 0 {
			t.Errorf("failed to load: %+v", failed)
		}
		return err
	})
	if err != nil {
		t.Fatalf("Capture: %v", err)
	}
	if st := a.Info().State; st != StatePaused {
		t.Errorf("after a capture the session is %s, want paused again", st)
	}
	if res := run(t, b, "(x, open('/workspace/f').read())"); res.Value != "([1, 2], 'data')" {
		t.Fatalf("loaded: %s %+v", res.Value, res.Exception)
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		// Busy until the test has tried the capture: it opens the gate after.
		run(t, b, "import os, time\nwhile not os.path.exists('/workspace/gate'): time.sleep(0.01)")
	}()
	for deadline := time.Now().Add(time.Minute); b.Info().State != StateBusy; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the exec never showed as busy")
		}
	}
	if err := b.Capture(ctx, 0, func(*runner.State, *container.Workspace) error { return nil }); !errors.Is(err, ErrBusy) {
		t.Errorf("Capture of a busy session: %v, want ErrBusy", err)
	}
	if err := b.WriteFile(ctx, "gate", nil, 0o644); err != nil {
		t.Fatalf("open the gate: %v", err)
	}
	<-done

	a.End("parked")
	if _, err := m.Get(a.ID()); !errors.Is(err, ErrNotFound) {
		t.Errorf("an ended session is still there: %v", err)
	}
	if err := a.Capture(ctx, 0, func(*runner.State, *container.Workspace) error { return nil }); !errors.Is(err, ErrDead) {
		t.Errorf("Capture of an ended session: %v, want ErrDead", err)
	}
	left := map[string]bool{}
	for _, d := range cgroupDirs(t, name) {
		left[filepath.Base(d)] = true
	}
	if len(left) != 1 {
		t.Errorf("sandbox cgroups %v, want 1 (the ended session's gone)", left)
	}
	if m.Live() != 1 {
		t.Errorf("%d live sessions, want 1", m.Live())
	}
}
