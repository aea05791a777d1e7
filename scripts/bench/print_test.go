package bench

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// sampleReport has every part, with figures of the shape this machine
// gives.
func sampleReport() *report {
	return &report{
		Machine: "host: kernel 6.18.0, 2 cores, load 0.50 0.40 0.30",
		Command: "python3 -c print(1)",
		Latency: []latency{
			{System: "nsbox (cold)", Runs: 100, P50Ms: 15.5, P95Ms: 20.1, VsBwrap: 1.55},
			{System: "bwrap", Runs: 100, P50Ms: 10, P95Ms: 12.25, VsBwrap: 1},
			{System: "bare python3", Runs: 100, P50Ms: 8, P95Ms: 9, VsBwrap: 0.8},
		},
		Throughput: []throughput{
			{System: "nsbox (cold)", Concurrency: 2, RunsPerSec: 80, VsBwrap: 0.75},
			{System: "bwrap", Concurrency: 2, RunsPerSec: 106.7, VsBwrap: 1},
		},
		Daemon: "a private daemon (this binary), default pool on minimal, no zygote",
		DaemonLatency: []daemonLatency{
			{System: "print(1), warm (pooled)", Runs: 100, P50Ms: 2, P95Ms: 2.6, Pooled: 1, VsCold: 0.12, Target: "<= 3 ms p50"},
			{System: "print(1), cold", Runs: 100, P50Ms: 16.4, P95Ms: 19},
		},
		DaemonThroughput: []daemonThroughput{
			{System: "print(1), cold", Concurrency: 1, RunsPerSec: 55.5, VsCold: 1},
			{System: "print(1), warm", Concurrency: 1, RunsPerSec: 61, Pooled: 0.333, VsCold: 1.1},
		},
		ZygoteDaemon: "a private daemon with a zygote on default (pool of 2 pre-forked children); cold: the daemon above",
		ZygoteLoad:   "0.50 0.40 0.30 -> 1.00 0.50 0.30",
		ZygoteLatency: []daemonLatency{
			{System: "import pandas, cold", Runs: 10, P50Ms: 400, P95Ms: 420},
			{System: "import pandas, zygote", Runs: 100, P50Ms: 17.3, P95Ms: 22, VsCold: 0.04, Target: "<= 10 ms p50"},
		},
		ZygoteThroughput: []daemonThroughput{
			{System: "import pandas, cold", Concurrency: 2, RunsPerSec: 4.5},
			{System: "import pandas, zygote", Concurrency: 2, RunsPerSec: 101, VsCold: 22.4},
			{System: "import pandas, zygote pre-forked", Concurrency: 2, RunsPerSec: 120, Pooled: 0.9, VsCold: 26.7},
		},
		Skipped: []string{"runc: not installed (apt-get install runc)"},
	}
}

func TestPrintReport(t *testing.T) {
	systems := []system{{Name: "nsbox (cold)", Note: "clone + cgroup placement on demand"}, {Name: "bwrap"}}
	engineOnly := sampleReport()
	engineOnly.DaemonLatency, engineOnly.ZygoteLatency = nil, nil
	daemonOnly := sampleReport()
	daemonOnly.Latency, daemonOnly.ZygoteLatency = nil, nil
	tests := []struct {
		name    string
		rep     *report
		systems []system
	}{
		{"all", sampleReport(), systems},
		{"engine", engineOnly, systems},
		{"daemon", daemonOnly, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			printReport(&out, tc.rep, tc.systems)
			golden(t, filepath.Join("testdata", "report-"+tc.name+".txt"), out.String())
		})
	}
}

// golden compares got with the file at path, or rewrites it with -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Fatalf("output differs from %s:\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// failAfter is a writer that takes n bytes, then fails as a full disk does.
type failAfter struct{ n int }

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k := f.n
		f.n = 0
		return k, syscall.ENOSPC
	}
	f.n -= len(p)
	return len(p), nil
}

// TestWriteReportNeverSilent: a bench whose report cannot be written, in
// part or at all, or that has nothing to report, returns an error (main
// prints it and exits 1) instead of ending with success and no report.
func TestWriteReportNeverSilent(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		var buf strings.Builder
		if err := writeReport(&buf, sampleReport(), nil, asJSON); err != nil || buf.Len() == 0 {
			t.Fatalf("json=%v: %v, %d bytes; want the report and no error", asJSON, err, buf.Len())
		}
		for _, n := range []int{0, 100, buf.Len() - 1} {
			err := writeReport(&failAfter{n: n}, sampleReport(), nil, asJSON)
			if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "writing the report") {
				t.Errorf("json=%v, a writer failing after %d of %d bytes: %v; want the write error", asJSON, n, buf.Len(), err)
			}
		}
		err := writeReport(&buf, &report{Machine: "m", Command: "c"}, nil, asJSON)
		if err == nil || !strings.Contains(err.Error(), "nothing was measured") {
			t.Errorf("json=%v, an empty report: %v; want an error", asJSON, err)
		}
	}
	if err := writeReport(io.Discard, &report{Skipped: []string{"e2b: no node"}}, nil, false); err != nil {
		t.Errorf("a report of skips alone: %v; want it printed", err)
	}
}
