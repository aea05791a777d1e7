package container

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/internal/runenv"
	"github.com/nsbox/nsbox/container/internal/testenv"
)

// bwrapCmd is the baseline: bubblewrap with every namespace unshared, the
// same rootfs read-only, fresh /proc, /dev and /tmp (no seccomp, no cgroup).
func bwrapCmd(root string, argv ...string) *exec.Cmd {
	args := []string{
		"--unshare-all", "--die-with-parent", "--new-session",
		"--ro-bind", root, "/", "--proc", "/proc", "--dev", "/dev",
		"--tmpfs", "/tmp", "--tmpfs", "/workspace", "--chdir", "/workspace",
		"--clearenv", "--setenv", "PATH", runenv.BasePath, "--setenv", "HOME", "/workspace",
		"--uid", "1000", "--gid", "1000", "--",
	}
	return exec.Command("bwrap", append(args, argv...)...)
}

type sample []time.Duration

func (s sample) pct(p float64) time.Duration {
	c := append(sample(nil), s...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	return c[min(len(c)-1, int(p*float64(len(c))))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkColdPrint alternates python3 -c 'print(1)' on the same rootfs
// in three ways, so machine drift hits all equally: an nsbox sandbox spawned
// on demand (cold), an nsbox sandbox from a spare init (cloned and placed in
// its cgroup ahead of time, fresh namespaces all the same), and bwrap
// --unshare-all. It reports medians, p95s and ratios to bwrap.
func BenchmarkColdPrint(b *testing.B) {
	cold := newTestEngine(b)
	testSpares = 1
	spare := newTestEngine(b)
	testSpares = 0
	root := testenv.Rootfs(b)
	if _, err := exec.LookPath("bwrap"); err != nil {
		b.Skip("bwrap not installed (apt-get install bubblewrap): no baseline")
	}
	argv := []string{"python3", "-c", "print(1)"}
	run := func(e *Engine) time.Duration {
		t0 := time.Now()
		res, err := e.Run(context.Background(), Spec{RootfsDir: root, Argv: argv})
		if err != nil || res.Status != StatusOK {
			b.Fatalf("nsbox: %v %+v", err, res)
		}
		return time.Since(t0)
	}
	var nc, ns, bw sample
	for b.Loop() {
		nc = append(nc, run(cold))
		t0 := time.Now()
		if out, err := bwrapCmd(root, argv...).CombinedOutput(); err != nil {
			b.Fatalf("bwrap: %v: %s", err, out)
		}
		bw = append(bw, time.Since(t0))
		ns = append(ns, run(spare))
	}
	b.ReportMetric(ms(nc.pct(0.5)), "cold-p50-ms")
	b.ReportMetric(ms(nc.pct(0.95)), "cold-p95-ms")
	b.ReportMetric(ms(ns.pct(0.5)), "spare-p50-ms")
	b.ReportMetric(ms(ns.pct(0.95)), "spare-p95-ms")
	b.ReportMetric(ms(bw.pct(0.5)), "bwrap-p50-ms")
	b.ReportMetric(ms(bw.pct(0.95)), "bwrap-p95-ms")
	b.ReportMetric(float64(nc.pct(0.5))/float64(bw.pct(0.5)), "cold/bwrap")
	b.ReportMetric(float64(ns.pct(0.5))/float64(bw.pct(0.5)), "spare/bwrap")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkThroughput2 measures runs/s with two workers, nsbox and bwrap
// in alternating one-second rounds.
func BenchmarkThroughput2(b *testing.B) {
	e := newTestEngine(b)
	root := testenv.Rootfs(b)
	if _, err := exec.LookPath("bwrap"); err != nil {
		b.Skip("bwrap not installed: no baseline")
	}
	argv := []string{"python3", "-c", "print(1)"}
	nsbox := func() error {
		res, err := e.Run(context.Background(), Spec{RootfsDir: root, Argv: argv})
		if err == nil && res.Status != StatusOK {
			err = fmt.Errorf("status %s", res.Status)
		}
		return err
	}
	bwrap := func() error { return bwrapCmd(root, argv...).Run() }
	round := func(f func() error) float64 {
		var wg sync.WaitGroup
		var mu sync.Mutex
		n := 0
		deadline := time.Now().Add(time.Second)
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					if err := f(); err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					n++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return float64(n)
	}
	var rn, rb []float64
	for b.Loop() {
		rn = append(rn, round(nsbox))
		rb = append(rb, round(bwrap))
	}
	med := func(v []float64) float64 { sort.Float64s(v); return v[len(v)/2] }
	b.ReportMetric(med(rn), "nsbox-runs/s")
	b.ReportMetric(med(rb), "bwrap-runs/s")
	b.ReportMetric(med(rn)/med(rb), "ratio")
	b.ReportMetric(0, "ns/op")
}

// zygoteCells are the cells of issue 10's targets.
var zygoteCells = []struct{ name, code string }{
	{"pandas", "import pandas; print(1)"},
	{"stack", "import pandas, matplotlib.pyplot, scipy, sklearn; print(1)"},
}

// BenchmarkZygoteCell runs the data-science cells on children forked on
// request from a zygote that pre-imported the stack: request to exit
// status, p50/p95, and runs/s with two workers. The cold figure (a fresh
// sandboxed interpreter importing it all) is measured a few times for
// scale.
func BenchmarkZygoteCell(b *testing.B) {
	e := newTestEngine(b)
	root := testenv.DataSciRootfs(b)
	z := newTestZygoteConfig(b, e, ZygoteConfig{RootfsDir: root, Modules: []string{"numpy", "pandas", "matplotlib", "matplotlib.pyplot", "scipy", "sklearn"},
		Env: []string{"MPLBACKEND=Agg"}, HugePages: true})
	run := func(f func(context.Context, Spec) (*Result, error), code string) time.Duration {
		t0 := time.Now()
		res, err := f(context.Background(), Spec{RootfsDir: root, Argv: []string{"python3", "-I", "-c", code}})
		if err != nil || res.Status != StatusOK {
			b.Fatalf("%v %+v", err, res)
		}
		return time.Since(t0)
	}
	for _, c := range zygoteCells {
		b.Run(c.name, func(b *testing.B) {
			var cold, zy sample
			for range 3 {
				cold = append(cold, run(e.Run, c.code))
			}
			for b.Loop() {
				zy = append(zy, run(z.Run, c.code))
			}
			n := 0
			var mu sync.Mutex
			var wg sync.WaitGroup
			deadline := time.Now().Add(2 * time.Second)
			for range 2 {
				wg.Go(func() {
					for time.Now().Before(deadline) {
						run(z.Run, c.code)
						mu.Lock()
						n++
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			b.ReportMetric(ms(cold.pct(0.5)), "cold-p50-ms")
			b.ReportMetric(ms(zy.pct(0.5)), "zygote-p50-ms")
			b.ReportMetric(ms(zy.pct(0.95)), "zygote-p95-ms")
			b.ReportMetric(float64(n)/2, "zygote-runs/s@2")
			b.ReportMetric(0, "ns/op")
		})
	}
}
