package daemon

import (
	"strings"
	"time"

	"github.com/nsbox/nsbox/daemon/lang"
	"github.com/nsbox/nsbox/daemon/policy"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/pool"
	"github.com/nsbox/nsbox/container/runner"
	"github.com/nsbox/nsbox/container/session"
)

// Pool hands out Python runners started ahead of time; *pool.Pool
// implements it.
type Pool interface {
	Take(key pool.Key) *pool.Taken
	Stats() []pool.Stats
	Unmatched() uint64
}

// takePooled takes a warm runner for a Python run, or returns nil.
func (d *Daemon) takePooled(rootfs string, spec container.Spec, kind runner.Language) *pool.Taken {
	if d.cfg.Pool == nil {
		return nil
	}
	return d.cfg.Pool.Take(pool.Key{Rootfs: rootfs, RootfsDir: spec.RootfsDir, Limits: spec.Limits, Env: spec.Env, Stdin: spec.Stdin != nil, Language: kind})
}

// takeForSession is session.Config.Take.
func (d *Daemon) takeForSession(opts session.Options) *runner.Runner {
	if d.cfg.Pool == nil {
		return nil
	}
	tk := d.cfg.Pool.Take(pool.Key{Rootfs: opts.Rootfs, RootfsDir: opts.RootfsDir, Limits: opts.Limits, Env: opts.Env, Language: opts.Runner})
	if tk == nil {
		return nil
	}
	return tk.Detach() // the session holds the rootfs
}

// poolInfo describes the pools for /v1/info.
func (d *Daemon) poolInfo() []agentapi.PoolInfo {
	out := []agentapi.PoolInfo{}
	if d.cfg.Pool == nil {
		return out
	}
	for _, st := range d.cfg.Pool.Stats() {
		pi := agentapi.PoolInfo{
			Name: st.Name, Rootfs: st.Rootfs, Language: lang.OfRunner(st.Language).Name, Limits: policy.WireLimits(st.Limits), Preimport: st.Preimport, Skipped: st.Skipped,
			Size: st.Size, Ready: st.Ready, Spawning: st.Spawning, Forked: st.Forked,
			Hits: st.Hits, Misses: st.Misses, Discarded: st.Discarded, Replaced: st.Replaced, Failures: st.Failures, LastError: st.LastError,
			Refills: st.Refills, LastRefillMs: ms(st.LastRefill),
		}
		pi.Limits.TimeoutMs, pi.Limits.OutputBytes = 0, 0
		if st.Refills > 0 {
			pi.MeanRefillMs = ms(st.RefillSum / time.Duration(st.Refills))
		}
		if len(st.Env) > 0 {
			pi.Env = map[string]string{}
			for _, kv := range st.Env {
				k, v, _ := strings.Cut(kv, "=")
				pi.Env[k] = v
			}
		}
		out = append(out, pi)
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// poolCollector exports the pools' state as Prometheus metrics.
type poolCollector struct {
	p                                              Pool
	hits, misses, discarded, failures, size, ready *prometheus.Desc
	refill, unmatched, replaced                    *prometheus.Desc
}

func newPoolCollector(p Pool) *poolCollector {
	l := []string{"pool"}
	return &poolCollector{
		p:         p,
		hits:      prometheus.NewDesc("nsbox_pool_hits_total", "Python runs and sessions that took a warm runner.", l, nil),
		misses:    prometheus.NewDesc("nsbox_pool_misses_total", "Python runs and sessions matching a pool that found no runner ready (started cold).", l, nil),
		discarded: prometheus.NewDesc("nsbox_pool_discarded_total", "Pooled runners that died while waiting and were replaced.", l, nil),
		failures:  prometheus.NewDesc("nsbox_pool_refill_failures_total", "Pool refills that failed.", l, nil),
		size:      prometheus.NewDesc("nsbox_pool_size", "Runners a pool keeps ready.", l, nil),
		ready:     prometheus.NewDesc("nsbox_pool_ready", "Runners ready in a pool now.", l, nil),
		replaced:  prometheus.NewDesc("nsbox_pool_replaced_total", "Runners started cold that were replaced by zygote children once the zygote was ready.", l, nil),
		refill:    prometheus.NewDesc("nsbox_pool_refill_duration_seconds", "Time to start one pooled runner, pre-imports included.", l, nil),
		unmatched: prometheus.NewDesc("nsbox_pool_unmatched_total", "Python runs and sessions no pool profile matched (started cold).", nil, nil),
	}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.hits, c.misses, c.discarded, c.replaced, c.failures, c.size, c.ready, c.refill, c.unmatched} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	bounds := pool.RefillBuckets()
	for _, st := range c.p.Stats() {
		ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(st.Hits), st.Name)
		ch <- prometheus.MustNewConstMetric(c.misses, prometheus.CounterValue, float64(st.Misses), st.Name)
		ch <- prometheus.MustNewConstMetric(c.discarded, prometheus.CounterValue, float64(st.Discarded), st.Name)
		ch <- prometheus.MustNewConstMetric(c.replaced, prometheus.CounterValue, float64(st.Replaced), st.Name)
		ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(st.Failures), st.Name)
		ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(st.Size), st.Name)
		ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, float64(st.Ready), st.Name)
		buckets := make(map[float64]uint64, len(bounds))
		var cum uint64
		for i, b := range bounds {
			cum += st.RefillCounts[i]
			buckets[b] = cum
		}
		ch <- prometheus.MustNewConstHistogram(c.refill, st.Refills, st.RefillSum.Seconds(), buckets, st.Name)
	}
	ch <- prometheus.MustNewConstMetric(c.unmatched, prometheus.CounterValue, float64(c.p.Unmatched()))
}
