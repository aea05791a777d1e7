package integration

import (
	"context"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/tests/internal/testdaemon"
)

// benchDataFrame is the state the fork and park benchmarks carry: pandas
// and a DataFrame of about 10 MB.
const benchDataFrame = "import pandas as pd, numpy as np\ndf = pd.DataFrame(np.random.rand(125_000, 10))\nint(df.memory_usage().sum())"

// benchSession starts a daemon on the data-science rootfs (zygote and pool
// as configured by default) and a session holding benchDataFrame.
func benchSession(b *testing.B) (*testdaemon.Daemon, string) {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Skip("requires root: the daemon runs sandboxes")
	}
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	name := testdaemon.DataSciRootfs(b)
	d := testdaemon.New(b, nsboxBin, "nsbox-bench-", "--default-rootfs", name, "--spare-inits", "0")
	d.Start(b)
	d.Settle(b) // the zygote up and the pool full: branches come from them
	ctx := context.Background()
	s, err := d.Client.CreateSession(ctx, &agentapi.SessionRequest{Limits: &agentapi.Limits{MemoryBytes: 2 << 30}})
	if err != nil {
		b.Fatal(err)
	}
	res, err := d.Client.Exec(ctx, s.ID, &agentapi.ExecRequest{Code: benchDataFrame})
	if err != nil || res.Status != agentapi.StatusOK {
		b.Fatalf("%+v %v", res, err)
	}
	b.Logf("DataFrame: %s bytes", res.Value)
	return d, s.ID
}

// reportP50 reports the median of ds in ms.
func reportP50(b *testing.B, ds []time.Duration) {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	if len(ds) > 0 {
		b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "ms-p50")
	}
}

func benchFork(b *testing.B, n int) {
	d, id := benchSession(b)
	ctx := context.Background()
	var ds []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		out, err := d.Client.ForkSession(ctx, id, n)
		ds = append(ds, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		for _, s := range out.Sessions {
			if err := d.Client.DeleteSession(ctx, s.ID); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	b.StopTimer()
	reportP50(b, ds)
}

// BenchmarkFork1 forks a session holding pandas and a 10 MB DataFrame
// into one branch, through the daemon (target: 50 ms p50).
func BenchmarkFork1(b *testing.B) { benchFork(b, 1) }

// BenchmarkFork8 forks it into 8 branches (target: 200 ms).
func BenchmarkFork8(b *testing.B) { benchFork(b, 8) }

// BenchmarkParkRevive parks the session and revives it; ms-p50 is the
// revive's median (target: 100 ms), park-ms-p50 the park's.
func BenchmarkParkRevive(b *testing.B) {
	d, id := benchSession(b)
	ctx := context.Background()
	var parks, revives []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := d.Client.ParkSession(ctx, id); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := d.Client.ReviveSession(ctx, id); err != nil {
			b.Fatal(err)
		}
		parks, revives = append(parks, t1.Sub(t0)), append(revives, time.Since(t1))
	}
	b.StopTimer()
	reportP50(b, revives)
	sort.Slice(parks, func(i, j int) bool { return parks[i] < parks[j] })
	b.ReportMetric(float64(parks[len(parks)/2].Microseconds())/1000, "park-ms-p50")
}
