package daemon

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/nsbox/nsbox/container/session"
)

// metrics are the daemon's Prometheus metrics, in a registry of its own.
type metrics struct {
	reg           *prometheus.Registry
	runs          *prometheus.CounterVec
	queueWait     prometheus.Histogram
	runTime       prometheus.Histogram
	spawnFailures prometheus.Counter
	zygoteReruns  prometheus.Counter
	sessionExecs  *prometheus.CounterVec
	sessionsEnded *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nsbox_runs_total",
			Help: "Run requests by outcome: the engine's status, or invalid, rejected (429), setup_error.",
		}, []string{"status"}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "nsbox_run_queue_wait_seconds",
			Help:    "Time admitted runs waited for a run slot.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
		runTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "nsbox_run_duration_seconds",
			Help:    "Time from spawn to result, including teardown.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12),
		}),
		spawnFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nsbox_spawn_failures_total",
			Help: "Runs whose sandbox could not be set up.",
		}),
		zygoteReruns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nsbox_zygote_reruns_total",
			Help: "Python runs run again because their zygote died under them before they answered.",
		}),
		sessionExecs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nsbox_session_execs_total",
			Help: "Session execs by status (ok, exception, timeout, cancelled, oom, crashed).",
		}, []string{"status"}),
		sessionsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nsbox_sessions_ended_total",
			Help: "Sessions ended, by reason (killed: deleted, expired or shut down; oom; crashed; timeout).",
		}, []string{"reason"}),
	}
	m.reg.MustRegister(m.runs, m.queueWait, m.runTime, m.spawnFailures, m.zygoteReruns,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// gauges registers the in-flight and queue-depth gauges read from adm.
func (m *metrics) gauges(adm *admission) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nsbox_runs_in_flight", Help: "Runs executing now."},
			func() float64 { return float64(adm.inFlight()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nsbox_run_queue_depth", Help: "Runs waiting for a slot."},
			func() float64 { return float64(adm.queued()) }),
	)
}

// buildInfo registers nsbox_build_info, 1 with the version as labels.
func (m *metrics) buildInfo(version string) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nsbox_build_info", Help: "1, labelled with the daemon's version and Go version."},
		[]string{"version", "go_version"})
	g.WithLabelValues(version, runtime.Version()).Set(1)
	m.reg.MustRegister(g)
}

// registerSessions adds the session counters and the live-sessions gauge.
func (m *metrics) registerSessions(mgr *session.Manager) {
	m.reg.MustRegister(m.sessionExecs, m.sessionsEnded, prometheus.NewGaugeFunc(
		prometheus.GaugeOpts{Name: "nsbox_sessions_live", Help: "Sessions whose sandbox is up."},
		func() float64 { return float64(mgr.Live()) }), prometheus.NewGaugeFunc(
		prometheus.GaugeOpts{Name: "nsbox_sessions_paused", Help: "Live sessions that are paused (frozen: memory kept, no CPU)."},
		func() float64 {
			n := 0
			for _, in := range mgr.List() {
				if in.State == session.StatePaused {
					n++
				}
			}
			return float64(n)
		}))
}

// Metrics is the daemon's Prometheus registry, for a transport to serve.
func (d *Daemon) Metrics() prometheus.Gatherer { return d.metrics.reg }
