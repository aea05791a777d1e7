package session

import (
	"errors"
	"fmt"
	"time"

	"github.com/nsbox/nsbox/container/runner"
)

// SetLifetime makes the session end d from now, sooner or later than it
// would have (E2B's setTimeout); Info().Expires follows. Its whole life
// stays within the Manager's MaxLifetime as it was when the session was
// created (its sandbox's own limit): an end past that is refused with
// ErrLifetime, naming the maximum.
func (s *Session) SetLifetime(d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == StateDead {
		return fmt.Errorf("session %s: %w: %s", s.id, ErrDead, s.deadWhy)
	}
	if d <= 0 {
		return fmt.Errorf("session %s: %w: %v must be positive", s.id, ErrLifetime, d)
	}
	now := s.m.clock.Now()
	limit := s.created.Add(s.maxLife)
	if end := now.Add(d); end.After(limit) {
		return fmt.Errorf("session %s: %w: %v from now would end it %v after its creation; the maximum is %v (max_lifetime), %v from now",
			s.id, ErrLifetime, d, end.Sub(s.created).Round(time.Millisecond), s.maxLife, limit.Sub(now).Round(time.Millisecond))
	}
	s.expires = now.Add(d)
	s.lifeTimer.Reset(d)
	s.log.Info("session lifetime set", "ends_in", d)
	return nil
}

// parkRetry is how soon a lifetime park that found an exec running tries
// again.
const parkRetry = time.Second

// armLifeTimer starts the timer that ends the session at s.expires.
func (s *Session) armLifeTimer(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lifeTimer = s.m.clock.AfterFunc(d, s.lifeEnds)
}

func (s *Session) stopLifeTimer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lifeTimer != nil {
		s.lifeTimer.Stop()
	}
}

// lifeEnds ends the session when its lifetime is over. A SetLifetime that
// moved the end later while the timer fired has re-armed it; this only
// checks again.
func (s *Session) lifeEnds() {
	s.mu.Lock()
	now := s.m.clock.Now()
	left := s.expires.Sub(now)
	if left > 0 {
		s.lifeTimer.Reset(left)
	}
	lived := now.Sub(s.created).Round(time.Millisecond)
	dead := s.state == StateDead
	s.mu.Unlock()
	if left > 0 || dead {
		return
	}
	if s.opts.LifetimeAction == IdlePark && s.m.cfg.Park != nil {
		err := s.m.cfg.Park(s)
		if err == nil {
			s.log.Info("session lifetime ended: parked", "lived", lived)
			return
		}
		if errors.Is(err, ErrBusy) && s.m.clock.Now().Sub(s.created) < s.maxLife {
			// An exec runs: park once it is done (the sandbox's own
			// limit, the maximum lifetime, still ends it).
			s.mu.Lock()
			s.lifeTimer.Reset(parkRetry)
			s.mu.Unlock()
			return
		}
		s.log.Warn("session lifetime ended: park failed, ending it", "err", err)
	}
	s.die(runner.StatusTimeout, "its lifetime ended ("+lived.String()+" after its creation)")
}
