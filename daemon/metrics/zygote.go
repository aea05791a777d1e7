package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nsbox/nsbox/container/zygote"
)

// Zygotes reports the zygotes; *zygote.Set implements it.
type Zygotes interface {
	Stats() []zygote.Stats
}

// zygoteCollector exports the zygotes' state as Prometheus metrics.
type zygoteCollector struct {
	z                                   Zygotes
	ready, live, forks, fallbacks, rest *prometheus.Desc
}

func newZygoteCollector(z Zygotes) *zygoteCollector {
	l := []string{"rootfs", "zygote"} // zygote: main or lean
	return &zygoteCollector{
		z:         z,
		ready:     prometheus.NewDesc("nsbox_zygote_ready", "1 while the rootfs's zygote is ready to fork.", l, nil),
		live:      prometheus.NewDesc("nsbox_zygote_children", "Children of the zygote alive now.", l, nil),
		forks:     prometheus.NewDesc("nsbox_zygote_forks_total", "Python runs and sessions served by a child of the zygote.", l, nil),
		fallbacks: prometheus.NewDesc("nsbox_zygote_fallbacks_total", "Runs the zygote should have taken that started cold (it was down, full or its child failed verification).", l, nil),
		rest:      prometheus.NewDesc("nsbox_zygote_restarts_total", "Times the zygote died and was restarted.", l, nil),
	}
}

func (c *zygoteCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.ready, c.live, c.forks, c.fallbacks, c.rest} {
		ch <- d
	}
}

func (c *zygoteCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.z.Stats() {
		kind := "main"
		if st.Lean {
			kind = "lean"
		}
		ready := 0.0
		if st.State == "ready" {
			ready = 1
		}
		ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, ready, st.Rootfs, kind)
		ch <- prometheus.MustNewConstMetric(c.live, prometheus.GaugeValue, float64(st.Live), st.Rootfs, kind)
		ch <- prometheus.MustNewConstMetric(c.forks, prometheus.CounterValue, float64(st.Forks), st.Rootfs, kind)
		ch <- prometheus.MustNewConstMetric(c.fallbacks, prometheus.CounterValue, float64(st.Fallbacks), st.Rootfs, kind)
		ch <- prometheus.MustNewConstMetric(c.rest, prometheus.CounterValue, float64(st.Restarts), st.Rootfs, kind)
	}
}
