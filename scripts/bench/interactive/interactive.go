// Package interactive is the bench's "ports" section: what a person or an
// agent working in a sandbox feels, each beside the same thing done
// directly on the host in the same run, round by round in turn: a
// keystroke's echo through a terminal in a session (POST
// /v1/sessions/{id}/terminal) against a pty on the host, and requests to
// a server in a session through the port proxy (/v1/sessions/{id}/ports/
// {port}/) against the same server on the host's loopback.
package interactive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/scripts/bench/measure"
)

// Options are a run's sizes.
type Options struct {
	Echoes   int   // keystrokes echoed on each side
	Requests int   // small requests on each side
	Big      int64 // bytes of the large response
	BigRuns  int   // large responses on each side
}

// Row is one line of the section's table: the same measure directly on
// the host and through nsbox.
type Row struct {
	What string `json:"what"`
	// Unit is "ms" (Direct and Nsbox are p50s, the P95s beside them) or
	// "MiB/s" (the median of the runs' rates).
	Unit      string  `json:"unit"`
	Runs      int     `json:"runs"`
	Direct    float64 `json:"direct"`
	DirectP95 float64 `json:"direct_p95,omitempty"`
	Nsbox     float64 `json:"nsbox"`
	NsboxP95  float64 `json:"nsbox_p95,omitempty"`
	Target    string  `json:"target"`
}

// Added is what nsbox adds: the p50's difference, or the rate's ratio to
// the direct one.
func (r Row) Added() string {
	if r.Unit == "ms" {
		return fmt.Sprintf("%+.3f ms", r.Nsbox-r.Direct)
	}
	if r.Direct == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", r.Nsbox/r.Direct)
}

// Print writes rows as a table (w is a tabwriter).
func Print(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "PORTS\tRUNS\tUNIT\tDIRECT\tDIRECT P95\tNSBOX\tNSBOX P95\tADDED\tTARGET\t")
	for _, r := range rows {
		p95 := func(v float64) string {
			if r.Unit != "ms" {
				return "-"
			}
			return fmt.Sprintf("%.3f", v)
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%.3f\t%s\t%.3f\t%s\t%s\t%s\t\n", r.What, r.Runs, r.Unit,
			r.Direct, p95(r.DirectP95), r.Nsbox, p95(r.NsboxP95), r.Added(), r.Target)
	}
}

// Run measures on the daemon cl talks to, in one session of its default
// rootfs (which needs python3, sh, stty and cat).
func Run(ctx context.Context, cl *client.Client, o Options) (rows []Row, err error) {
	if o.Echoes < 1 || o.Requests < 1 || o.BigRuns < 1 || o.Big < 1 {
		return nil, errors.New("interactive: every count must be at least 1")
	}
	// The session's disk holds the large file; its CPUs are the host's,
	// as the direct side has no limit either.
	s, err := cl.CreateSession(ctx, &agentapi.SessionRequest{Processes: true,
		Limits: &agentapi.Limits{DiskBytes: o.Big + 64<<20, CPUs: float64(runtime.NumCPU())}})
	if err != nil {
		return nil, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := cl.DeleteSession(dctx, s.ID); derr != nil && err == nil {
			err = derr
		}
	}()
	host, box, err := echoes(ctx, cl, s.ID, o.Echoes)
	if err != nil {
		return nil, fmt.Errorf("keystroke echo: %w", err)
	}
	rows = append(rows, msRow("keystroke echo: terminal (stty raw; cat) vs a host pty", host, box, "<= 1 ms added"))
	pr, err := portRows(ctx, cl, s.ID, o)
	if err != nil {
		return nil, fmt.Errorf("port proxy: %w", err)
	}
	return append(rows, pr...), nil
}

// msRow is the row of latencies direct and box.
func msRow(what string, direct, box []time.Duration, target string) Row {
	return Row{What: what, Unit: "ms", Runs: len(box),
		Direct: measure.PctMs(direct, 0.5), DirectP95: measure.PctMs(direct, 0.95),
		Nsbox: measure.PctMs(box, 0.5), NsboxP95: measure.PctMs(box, 0.95), Target: target}
}
