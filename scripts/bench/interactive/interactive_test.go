package interactive

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/scripts/bench/benchd"
	"github.com/nsbox/nsbox/scripts/bench/benchd/benchtest"
)

// TestRunTiny runs the section at a tiny scale through a real private
// daemon (nsbox and nsbox-init built from this tree) so that it cannot
// rot: every row is there, counted, with figures on both sides.
func TestRunTiny(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("requires python3 on the host: the direct side's server")
	}
	nsbox, store, name := benchtest.Setup(t)
	d, err := benchd.Start(nsbox, store, name, "", "--pool-size", "0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang, not a slow machine
	defer cancel()
	rows, err := Run(ctx, d.Client, Options{Echoes: 3, Requests: 2, Big: 1 << 20, BigRuns: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		prefix, unit string
		runs         int
	}{{"keystroke echo", "ms", 3}, {"GET of 3 bytes", "ms", 2}, {"GET of 1 MiB", "MiB/s", 1}}
	if len(rows) != len(want) {
		t.Fatalf("rows %+v, want %d", rows, len(want))
	}
	for i, w := range want {
		r := rows[i]
		if !strings.HasPrefix(r.What, w.prefix) || r.Unit != w.unit || r.Runs != w.runs || r.Direct <= 0 || r.Nsbox <= 0 || r.Target == "" {
			t.Errorf("row %d: %+v, want %q in %s over %d runs, both sides measured, a target", i, r, w.prefix, w.unit, w.runs)
		}
	}
	var b strings.Builder
	Print(&b, rows)
	if !strings.Contains(b.String(), "TARGET") || strings.Count(b.String(), "\n") != 4 {
		t.Errorf("Print wrote %q", b.String())
	}
	// The session is gone: Run deleted it.
	if ss, err := d.Client.Sessions(ctx); err != nil || len(ss) != 0 {
		t.Errorf("sessions after Run: %v, %v; want none", ss, err)
	}
}
