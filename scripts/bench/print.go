package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/nsbox/nsbox/scripts/bench/interactive"
	"github.com/nsbox/nsbox/scripts/bench/llcost"
)

// writeReport writes rep to out, as JSON or as tables. A bench never ends
// in silence with success: a report it could not write (stdout closed, a
// full disk, a reader gone) and a report with nothing in it (no figure, no
// skip, no failure) are errors, which Run returns and main prints on
// stderr with exit status 1.
func writeReport(out io.Writer, rep *report, systems []system, asJSON bool) error {
	if rep.empty() {
		return errors.New("bench: nothing was measured, skipped or failed: no report to print")
	}
	w := &errWriter{w: out}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep) // its error is w.err
	} else {
		printReport(w, rep, systems)
	}
	if w.err != nil {
		return fmt.Errorf("bench: writing the report: %w", w.err)
	}
	return nil
}

// empty says whether rep has nothing printReport would print.
func (rep *report) empty() bool {
	return len(rep.Latency) == 0 && len(rep.DaemonLatency) == 0 && len(rep.ZygoteLatency) == 0 &&
		len(rep.Egress) == 0 && len(rep.Node) == 0 && len(rep.State) == 0 && len(rep.E2B) == 0 &&
		len(rep.Ports) == 0 && len(rep.Landlock) == 0 && len(rep.Skipped) == 0 && len(rep.Failed) == 0
}

// errWriter keeps the first error of its writes (fmt.Fprintf's and
// tabwriter's are dropped on the way) and writes nothing after it.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	e.err = err
	return n, err
}

// printReport writes rep as tables: the engine part (with the notes of
// its systems), the daemon part, the zygote part, then what was skipped
// and which sections failed.
// A part that did not run prints nothing.
func printReport(w io.Writer, rep *report, systems []system) {
	printEngine(w, rep, systems)
	printDaemon(w, rep)
	printZygote(w, rep)
	printEgress(w, rep)
	printNode(w, rep)
	printState(w, rep)
	printE2B(w, rep)
	printPorts(w, rep)
	printLandlock(w, rep)
	for _, s := range rep.Skipped {
		fmt.Fprintf(w, "  skipped %s\n", s)
	}
	for _, s := range rep.Failed {
		fmt.Fprintf(w, "  FAILED %s\n", s)
	}
}

func printEngine(w io.Writer, rep *report, systems []system) {
	if len(rep.Latency) == 0 {
		return
	}
	fmt.Fprintf(w, "%s\n%s, alternating\n\n", rep.Machine, rep.Command)
	tw := newTable(w)
	fmt.Fprintln(tw, "SYSTEM\tRUNS\tP50 ms\tP95 ms\tP50 vs bwrap\t")
	for _, l := range rep.Latency {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%s\t\n", l.System, l.Runs, l.P50Ms, l.P95Ms, ratio(l.VsBwrap))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = newTable(w)
	fmt.Fprintln(tw, "SYSTEM\tCONCURRENCY\tRUNS/S\tVS bwrap\t")
	for _, t := range rep.Throughput {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%s\t\n", t.System, t.Concurrency, t.RunsPerSec, ratio(t.VsBwrap))
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, s := range systems {
		if s.Note != "" {
			fmt.Fprintf(w, "  %s: %s\n", s.Name, s.Note)
		}
	}
}

func printDaemon(w io.Writer, rep *report) {
	if len(rep.DaemonLatency) == 0 {
		return
	}
	fmt.Fprintf(w, "\nthrough %s, over the Unix socket (alternating)\n\n", rep.Daemon)
	printDaemonLatency(w, rep.DaemonLatency)
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "THROUGHPUT\tCONCURRENCY\tRUNS/S\tPOOLED\tVS cold\t")
	for _, t := range rep.DaemonThroughput {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.0f%%\t%s\t\n", t.System, t.Concurrency, t.RunsPerSec, 100*t.Pooled, ratio(t.VsCold))
	}
	tw.Flush()
}

// section starts a part's table: the machine line when the engine part
// (which prints it) did not run, the part's title and its load averages.
func section(w io.Writer, rep *report, title, load string) *tabwriter.Writer {
	if len(rep.Latency) == 0 { // --only PART: the machine line is here
		fmt.Fprintln(w, rep.Machine)
	}
	fmt.Fprintf(w, "\n%s\nload average %s\n\n", title, load)
	return newTable(w)
}

func printEgress(w io.Writer, rep *report) {
	if len(rep.Egress) == 0 {
		return
	}
	tw := section(w, rep, "egress: through the daemon's proxy vs the same client on the host, one loopback server (alternating)", rep.EgressLoad)
	fmt.Fprintln(tw, "EGRESS\tUNIT\tBASELINE\tVALUE\tRATIO\tTARGET\t")
	for _, e := range rep.Egress {
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%s\t%s\t\n", e.What, e.Unit, e.Base, e.Value, ratio(e.Ratio), e.Target)
	}
	tw.Flush()
	for _, e := range rep.Egress {
		fmt.Fprintf(w, "  %s: baseline is %s\n", e.What, e.Baseline)
	}
}

func printZygote(w io.Writer, rep *report) {
	if len(rep.ZygoteLatency) == 0 {
		return
	}
	fmt.Fprintf(w, "\nzygote: %s\nload average %s\n\n", rep.ZygoteDaemon, rep.ZygoteLoad)
	printDaemonLatency(w, rep.ZygoteLatency)
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "THROUGHPUT\tCONCURRENCY\tRUNS/S\tPOOLED\tVS cold\tTARGET\t")
	for _, t := range rep.ZygoteThroughput {
		target := ""
		switch {
		case !strings.Contains(t.System, "zygote"):
		case strings.Contains(t.System, "sklearn"): // the whole stack (issue 10)
			target = ">= 100"
		default: // a pandas cell (issue 20)
			target = ">= 150"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.0f%%\t%s\t%s\t\n", t.System, t.Concurrency, t.RunsPerSec, 100*t.Pooled, ratio(t.VsCold), target)
	}
	tw.Flush()
}

// printDaemonLatency is the latency table of the daemon and zygote parts.
func printDaemonLatency(w io.Writer, rows []daemonLatency) {
	tw := newTable(w)
	fmt.Fprintln(tw, "REQUEST\tRUNS\tP50 ms\tP95 ms\tPOOLED\tP50 vs cold\tTARGET\t")
	for _, l := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.0f%%\t%s\t%s\t\n", l.System, l.Runs, l.P50Ms, l.P95Ms, 100*l.Pooled, ratio(l.VsCold), l.Target)
	}
	tw.Flush()
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
}

// ratio formats a ratio as "1.55x", or "-" when there is none.
func ratio(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", r)
}

func printE2B(w io.Writer, rep *report) {
	if len(rep.E2B) == 0 {
		return
	}
	tw := section(w, rep, "e2b: the E2B SDK against the same work through /v1, one private daemon on \"default\" (alternating rounds)", rep.E2BLoad)
	fmt.Fprintln(tw, "E2B\tRUNS\tP50\tP95\tVS /v1\tTARGET\t")
	for _, e := range rep.E2B {
		fmt.Fprintf(tw, "%s\t%d\t%.2f ms\t%.2f ms\t%s\t%s\t\n", e.System, e.Runs, e.P50Ms, e.P95Ms, ratio(e.VsV1), e.Target)
	}
	tw.Flush()
}

func printNode(w io.Writer, rep *report) {
	printCompare(w, rep, "node: JavaScript beside Python on \"default\" (alternating rounds)", rep.NodeLoad, "NODE", rep.Node)
}

func printState(w io.Writer, rep *report) {
	printCompare(w, rep, "state: fork, pause, park and volumes through a private daemon on \"default\", a session holding pandas and a 10 MB DataFrame (alternating rounds)", rep.StateLoad, "STATE", rep.State)
}

func printCompare(w io.Writer, rep *report, title, load, head string, rows []compareRow) {
	if len(rows) == 0 {
		return
	}
	tw := section(w, rep, title, load)
	fmt.Fprintf(tw, "%s\tRUNS\tP50\tP95\tVS\tRATIO\tTARGET\t\n", head)
	for _, n := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%.2f ms\t%.2f ms\t%s\t%s\t%s\t\n", n.System, n.Runs, n.P50Ms, n.P95Ms, n.Vs, ratio(n.Ratio), n.Target)
	}
	tw.Flush()
}

func printPorts(w io.Writer, rep *report) {
	if len(rep.Ports) == 0 {
		return
	}
	tw := section(w, rep, "ports: a terminal's echo and a server's answers through a private daemon vs the same on the host (alternating)", rep.PortsLoad)
	interactive.Print(tw, rep.Ports)
	tw.Flush()
}

func printLandlock(w io.Writer, rep *report) {
	if len(rep.Landlock) == 0 {
		return
	}
	tw := section(w, rep, "landlock: print(1) through private daemons with and without Landlock (alternating, the first swapped every round)", rep.LandlockLoad)
	llcost.Print(tw, rep.Landlock)
	tw.Flush()
}
