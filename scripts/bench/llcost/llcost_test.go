package llcost

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/sandboxinit"
	"github.com/nsbox/nsbox/scripts/bench/benchd/benchtest"
)

// TestRunTiny runs the section at its smallest scale through real private
// daemons (nsbox and nsbox-init built from this tree) so that it cannot
// rot: every path is measured on both sides, each daemon took the path
// its row names (Run checks each answer's pooled flag), and the figures
// are there.
func TestRunTiny(t *testing.T) {
	if sandboxinit.LandlockABI() == 0 {
		t.Skip("this kernel has no Landlock: the section has nothing to compare")
	}
	nsbox, store, name := benchtest.Setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a hang, not a slow machine
	defer cancel()
	rows, _, err := Run(ctx, Options{Nsbox: nsbox, Store: store, Rootfs: name, Runs: Blocks, NoSettle: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"cold", "zygote, forked", "zygote, pre-forked"}
	if len(rows) != len(want) {
		t.Fatalf("rows %+v, want %d", rows, len(want))
	}
	for i, r := range rows {
		if !strings.HasPrefix(r.Path, want[i]) || r.Runs != Blocks || r.OnP50 <= 0 || r.OffP50 <= 0 ||
			r.Ratio <= 0 || r.Low <= 0 || r.Low > r.High {
			t.Errorf("row %d: %+v, want %q with figures on both sides", i, r, want[i])
		}
	}
}

func TestRunNeedsBlocks(t *testing.T) {
	_, _, err := Run(context.Background(), Options{Runs: Blocks - 1})
	if err == nil || !strings.Contains(err.Error(), "at least 5") {
		t.Fatalf("Run with %d runs: %v, want the --runs error", Blocks-1, err)
	}
}
