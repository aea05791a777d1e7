package procs

import "time"

// SetSlowTimeout shortens a's SlowTimeout for a test.
func SetSlowTimeout(a *Agent, d time.Duration) { a.slow = d }
