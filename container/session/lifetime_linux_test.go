package session

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/runner"
)

// TestSetLifetime: a session lives past the lifetime it was created with
// when SetLifetime moves its end, ends at the new end (a timeout), and a
// life past the Manager's MaxLifetime is refused, naming it. With
// NoIdleEnd, idling past the idle timeout does not end it.
func TestSetLifetime(t *testing.T) {
	m, _ := newManager(t, Config{MaxLifetime: time.Minute})
	s := create(t, m, Options{Lifetime: time.Second, IdleTimeout: 200 * time.Millisecond, NoIdleEnd: true})
	if err := s.SetLifetime(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if left := time.Until(s.Info().Expires); left < 15*time.Second || left > 20*time.Second {
		t.Fatalf("Expires in %v after SetLifetime(20s)", left)
	}
	time.Sleep(2 * time.Second) // past its first lifetime and ten idle timeouts
	if info := s.Info(); info.State != StateIdle || !info.NoIdleEnd {
		t.Fatalf("2 s in: %+v, want it alive", info)
	}
	if res := run(t, s, "6 * 7"); res.Value != "42" {
		t.Fatalf("exec: %+v", res.Result)
	}
	err := s.SetLifetime(2 * time.Minute)
	if !errors.Is(err, ErrLifetime) || !strings.Contains(err.Error(), "1m0s") {
		t.Fatalf("SetLifetime past MaxLifetime: %v, want ErrLifetime naming 1m0s", err)
	}
	if err := s.SetLifetime(0); !errors.Is(err, ErrLifetime) {
		t.Fatalf("SetLifetime(0): %v", err)
	}
	if err := s.SetLifetime(300 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.Info().State != StateDead || m.Live() != 0 { // Live drops once the sandbox is gone
		if time.Now().After(deadline) {
			t.Fatalf("alive 30 s after a 300 ms lifetime: %+v", s.Info())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if info := s.Info(); info.DeadStatus != runner.StatusTimeout || !strings.Contains(info.DeadReason, "lifetime") {
		t.Fatalf("dead with %s: %s", info.DeadStatus, info.DeadReason)
	}
	if err := s.SetLifetime(time.Second); !errors.Is(err, ErrDead) {
		t.Fatalf("SetLifetime on a dead session: %v", err)
	}
}
