// Package clocktest is a fake clock.Clock for tests: time moves only when
// the test calls Advance, and Waiters tells the test when the code under
// test has armed a timer (its readiness signal).
package clocktest

import (
	"slices"
	"sync"
	"time"

	"github.com/nsbox/nsbox/container/clock"
)

// Fake is a clock.Clock whose time moves only by Advance. The zero value
// is not usable; use New.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*timer      // armed, in no order
	changed chan struct{} // closed when timers changes
}

var _ clock.Clock = (*Fake)(nil)

// New returns a Fake whose time starts at start.
func New(start time.Time) *Fake {
	return &Fake{now: start, changed: make(chan struct{})}
}

type timer struct {
	f    *Fake
	when time.Time
	fn   func()         // AfterFunc
	ch   chan time.Time // After
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// AfterFunc arms a timer that calls fn when Advance reaches now+d. fn runs
// in Advance's goroutine, so that its effects are done when Advance
// returns.
func (f *Fake) AfterFunc(d time.Duration, fn func()) clock.Timer {
	t := &timer{f: f, fn: fn}
	t.Reset(d)
	return t
}

// After returns a channel that gets the time when Advance reaches now+d.
func (f *Fake) After(d time.Duration) <-chan time.Time {
	t := &timer{f: f, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t.ch
}

// Advance moves the time on by d, firing the timers due on the way in
// the order of their times (a timer a callback re-arms within d fires
// too).
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	end := f.now.Add(d)
	f.mu.Unlock()
	for {
		f.mu.Lock()
		var next *timer
		for _, t := range f.timers {
			if !t.when.After(end) && (next == nil || t.when.Before(next.when)) {
				next = t
			}
		}
		if next == nil {
			f.now = end
			f.mu.Unlock()
			return
		}
		f.now = next.when
		f.remove(next)
		now := f.now
		f.mu.Unlock()
		if next.fn != nil {
			next.fn()
		} else {
			next.ch <- now
		}
	}
}

// Waiters is how many timers are armed.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// Next is how long from now the earliest armed timer fires; ok is false
// when none is armed.
func (f *Fake) Next() (d time.Duration, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.timers {
		if !ok || t.when.Sub(f.now) < d {
			d, ok = t.when.Sub(f.now), true
		}
	}
	return d, ok
}

// BlockUntil waits until at least n timers are armed: the code under test
// has got to its wait. It reports false if that took longer than timeout
// (real time), a failure of the code under test.
func (f *Fake) BlockUntil(n int, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		armed, changed := len(f.timers), f.changed
		f.mu.Unlock()
		if armed >= n {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}

// remove takes t out of the armed timers; f.mu is held.
func (f *Fake) remove(t *timer) bool {
	i := slices.Index(f.timers, t)
	if i < 0 {
		return false
	}
	f.timers = slices.Delete(f.timers, i, i+1)
	f.notify()
	return true
}

func (f *Fake) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func (t *timer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return t.f.remove(t)
}

func (t *timer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.f.remove(t)
	t.when = t.f.now.Add(d)
	t.f.timers = append(t.f.timers, t)
	t.f.notify()
	return was
}
