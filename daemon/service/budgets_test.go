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
