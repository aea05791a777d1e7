package procs

import "time"

// SetSlowTimeout shortens a's SlowTimeout for a test.
func SetSlowTimeout(a *Agent, d time.Duration) { a.slow = d }

// SetWatchMax lowers w's queue bound for a test.
func SetWatchMax(w *Watch, n int) { w.max = n }

// InjectWatchEvents passes w events as if the agent had sent them, one
// frame of each slice.
func InjectWatchEvents(a *Agent, w *Watch, frames ...[][2]string) {
	for _, f := range frames {
		a.watchEvent(&message{Wid: w.wid, Ev: f})
	}
}
