package session

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/runner"
)

// TestPooledRunner: a session takes a runner from Config.Take, gets its
// input files written into it, and still ends at MaxLifetime although the
// runner's own sandbox would live far longer.
func TestPooledRunner(t *testing.T) {
	var took atomic.Int32
	var m *Manager
	m, _ = newManager(t, Config{MaxLifetime: 3 * time.Second, Take: func(opts Options) *runner.Runner {
		r, err := runner.Start(context.Background(), m.cfg.Starter, container.Spec{
			RootfsDir: opts.RootfsDir, Limits: container.Limits{Timeout: time.Hour},
		})
		if err != nil {
			t.Errorf("start the pooled runner: %v", err)
			return nil
		}
		took.Add(1)
		return r
	}})
	s := create(t, m, Options{Files: []container.File{{Path: "d/in.txt", Data: []byte("pooled"), Mode: 0o644}}})
	if took.Load() != 1 || !s.Info().Pooled {
		t.Fatalf("session did not take the pooled runner (took %d, info %+v)", took.Load(), s.Info())
	}
	if res := run(t, s, "open('d/in.txt').read()"); res.Value != "'pooled'" {
		t.Fatalf("input file: value %q exception %+v", res.Value, res.Exception)
	}
	deadline := time.Now().Add(time.Minute)
	for s.Info().State != StateDead {
		if time.Now().After(deadline) {
			t.Fatal("pooled session outlived MaxLifetime")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
