package service

import (
	"testing"

	"github.com/nsbox/nsbox/agentapi/httpkit"
	"github.com/nsbox/nsbox/daemon"
	"github.com/nsbox/nsbox/daemon/config"
)

// TestBudgetDefaults: [budgets]'s defaults are the core's and the HTTP
// kit's own, so that a file without the table and one that writes the
// documented defaults run the same daemon.
func TestBudgetDefaults(t *testing.T) {
	if config.DefaultResultBudget != daemon.DefaultResultBytes {
		t.Errorf("[budgets] results defaults to %d, the core's result budget to %d", config.DefaultResultBudget, daemon.DefaultResultBytes)
	}
	if body := httpkit.NewBodies(httpkit.Limits{}).Limits().MaxBodyBytesInFlight; config.DefaultBodyBudget != body {
		t.Errorf("[budgets] bodies defaults to %d, the HTTP kit's body budget to %d", config.DefaultBodyBudget, body)
	}
}

// TestSoftMemoryLimit: the runtime's soft limit is 384 MiB at the default
// budgets and below, and grows with larger ones as the sizing says.
func TestSoftMemoryLimit(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		results, bodies, want int64
	}{
		{256 * mib, 128 * mib, 384 * mib},
		{16 * mib, 64 * mib, 384 * mib},
		{512 * mib, 128 * mib, 768 * mib},
		{256 * mib, 256 * mib, 704 * mib},
	} {
		if got := softMemoryLimit(config.BudgetsConfig{ResultBytes: tc.results, BodyBytes: tc.bodies}); got != tc.want {
			t.Errorf("results %d MiB, bodies %d MiB: soft limit %d MiB, want %d", tc.results/mib, tc.bodies/mib, got/mib, tc.want/mib)
		}
	}
}
