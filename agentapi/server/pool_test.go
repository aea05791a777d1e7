package server

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/pool"
)

// fakePool has nothing ready and reports fixed stats.
type fakePool struct{ stats []pool.Stats }

func (p *fakePool) Take(pool.Key) *pool.Taken { return nil }
func (p *fakePool) Stats() []pool.Stats       { return p.stats }
func (p *fakePool) Unmatched() uint64         { return 3 }

func TestPoolInfoAndMetrics(t *testing.T) {
	counts := make([]uint64, len(pool.RefillBuckets()))
	counts[3] = 2
	fp := &fakePool{stats: []pool.Stats{{
		Name: "default", Rootfs: "default", Limits: container.DefaultLimits(), Env: []string{"A=1"}, Preimport: []string{"numpy"},
		Size: 2, Ready: 1, Hits: 5, Misses: 1, Refills: 2, RefillSum: 80 * time.Millisecond, LastRefill: 30 * time.Millisecond, RefillCounts: counts,
	}}}
	ts := startServer(t, nil, func(c *testConfig) { c.Pool = fp })
	in, err := ts.client.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Pools) != 1 {
		t.Fatalf("pools %+v, want one", in.Pools)
	}
	p := in.Pools[0]
	if p.Name != "default" || p.Size != 2 || p.Ready != 1 || p.Hits != 5 || p.Misses != 1 || p.MeanRefillMs != 40 || p.LastRefillMs != 30 ||
		p.Env["A"] != "1" || p.Limits.TimeoutMs != 0 || p.Limits.MemoryBytes != container.DefaultLimits().MemoryBytes {
		t.Errorf("pool info %+v", p)
	}

	resp, err := ts.http.Get("http://nsbox/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`nsbox_pool_hits_total{pool="default"} 5`, `nsbox_pool_misses_total{pool="default"} 1`,
		`nsbox_pool_size{pool="default"} 2`, `nsbox_pool_ready{pool="default"} 1`,
		`nsbox_pool_refill_duration_seconds_count{pool="default"} 2`, `nsbox_pool_unmatched_total 3`,
		"go_goroutines ", "process_open_fds ",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestSaturated(t *testing.T) {
	r, started, release := blockingRunner()
	ts := startServer(t, r, nil) // 2 slots
	if ts.core.Saturated() {
		t.Fatal("saturated with no run")
	}
	for range 2 {
		go ts.client.Run(context.Background(), &agentapi.RunRequest{Argv: []string{"x"}})
		<-started
	}
	if !ts.core.Saturated() {
		t.Error("not saturated with both slots taken")
	}
	close(release)
}
