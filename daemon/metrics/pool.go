package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nsbox/nsbox/container/pool"
)

// Pool reports the pools of warm runners; *pool.Pool implements it.
type Pool interface {
	Stats() []pool.Stats
	Unmatched() uint64
}

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
