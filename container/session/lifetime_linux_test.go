package session

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/clock/clocktest"
	"github.com/nsbox/nsbox/container/runner"
)

// TestSetLifetime: a session lives past the lifetime it was created with
// when SetLifetime moves its end, ends at the new end (a timeout), and a
// life past the Manager's MaxLifetime is refused, naming it. With
// NoIdleEnd, idling past the idle timeout does not end it.
func TestSetLifetime(t *testing.T) {
	clk := clocktest.New(time.Now())
	m, _ := newManager(t, Config{MaxLifetime: time.Minute, Clock: clk})
	s := create(t, m, Options{Lifetime: time.Second, IdleTimeout: 200 * time.Millisecond, NoIdleEnd: true})
	if err := s.SetLifetime(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if left := s.Info().Expires.Sub(clk.Now()); left != 20*time.Second {
		t.Fatalf("Expires in %v after SetLifetime(20s)", left)
	}
	clk.Advance(2 * time.Second) // past its first lifetime and ten idle timeouts
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
	clk.Advance(299 * time.Millisecond)
	if st := s.Info().State; st != StateIdle {
		t.Fatalf("state %s 1 ms before its lifetime ends, want idle", st)
	}
	clk.Advance(time.Millisecond) // the timer's callback ends it before Advance returns
	if info := s.Info(); info.State != StateDead || m.Live() != 0 || info.DeadStatus != runner.StatusTimeout || !strings.Contains(info.DeadReason, "lifetime") {
		t.Fatalf("at its lifetime's end: %+v, %d live; want dead with timeout", info, m.Live())
	}
	if err := s.SetLifetime(time.Second); !errors.Is(err, ErrDead) {
		t.Fatalf("SetLifetime on a dead session: %v", err)
	}
}

// TestHoldKeepsIdleOff: a held session (an open terminal) outlives its
// idle timeout however long it is quiet, and idles out a whole timeout
// after the release; its lifetime is not held off.
func TestHoldKeepsIdleOff(t *testing.T) {
	clk := clocktest.New(time.Now())
	m, _ := newManager(t, Config{MaxLifetime: time.Hour, Clock: clk})
	s := create(t, m, Options{Lifetime: time.Minute, IdleTimeout: 200 * time.Millisecond})
	release := s.Hold()
	for range 10 {
		clk.Advance(200 * time.Millisecond)
	}
	if st := s.Info().State; st != StateIdle {
		t.Fatalf("held, ten idle timeouts on: %s, want it alive", st)
	}
	release()
	release() // once only
	clk.Advance(199 * time.Millisecond)
	if st := s.Info().State; st != StateIdle {
		t.Fatalf("199 ms after the release: %s, want it alive", st)
	}
	clk.Advance(201 * time.Millisecond)
	if st := s.Info().State; st != StateDead {
		t.Fatalf("an idle timeout after the release: %s, want dead", st)
	}

	held := create(t, m, Options{Lifetime: time.Second, IdleTimeout: 200 * time.Millisecond})
	defer held.Hold()()
	clk.Advance(time.Second)
	if st := held.Info().State; st != StateDead {
		t.Fatalf("held past its lifetime: %s, want dead", st)
	}
}
