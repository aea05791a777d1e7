// Package clock is the time source of the session lifetimes, idle timers
// and pool back-offs: the real clock in the product, a fake
// (clock/clocktest) in tests, so that a test of a lifetime or a back-off
// moves time instead of sleeping through it.
package clock

import "time"

// Clock is what the timed parts of the engine ask of time.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d, as time.AfterFunc.
	AfterFunc(d time.Duration, f func()) Timer
	// After sends the time on the returned channel after d, as time.After.
	After(d time.Duration) <-chan time.Time
}

// Timer is the part of *time.Timer an AfterFunc timer is used through.
type Timer interface {
	Stop() bool
	Reset(d time.Duration) bool
}

// Real is the system clock.
var Real Clock = real{}

// Or returns c, or Real when c is nil (a Config's zero value).
func Or(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}

type real struct{}

func (real) Now() time.Time                            { return time.Now() }
func (real) After(d time.Duration) <-chan time.Time    { return time.After(d) }
func (real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
