// Package metrics holds the daemon's Prometheus metrics in a registry of
// their own: the run and session counters the core bumps, the gauges it
// reads from admission and the session manager, and the collectors that
// export the pools' and zygotes' state at scrape time. The core owns one
// Metrics and calls its methods; a transport serves Gatherer.
//
// Metric names, help texts and labels are what operators' dashboards and
// alerts match on: metrics_test.go holds the full list, and a change to
// it is a change to the daemon's interface (docs/OPERATIONS.md).
package metrics

import (
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/nsbox/nsbox/container/session"
)

// Admission reports the run slots: runs executing and runs waiting.
type Admission interface {
	InFlight() int
	Queued() int
}

// Sessions reports the live sessions; *session.Manager implements it.
type Sessions interface {
	Live() int
	List() []session.Info
}

// Metrics are the daemon's Prometheus metrics.
type Metrics struct {
	reg           *prometheus.Registry
	runs          *prometheus.CounterVec
	queueWait     prometheus.Histogram
	runTime       prometheus.Histogram
	spawnFailures prometheus.Counter
	zygoteReruns  prometheus.Counter
	sessionExecs  *prometheus.CounterVec
	sessionsEnded *prometheus.CounterVec
	egressConns   *prometheus.CounterVec
	egressBytes   *prometheus.CounterVec
	ports         portMetrics
}

// New returns the metrics of a daemon of version whose run slots adm
// reports: the run and egress counters, the admission gauges, build info,
// and the Go runtime's and process's collectors. The session, pool and
// zygote metrics are added by AddSessions, AddPool and AddZygotes, for a
// daemon that has them.
func New(version string, adm Admission) *Metrics {
	m := &Metrics{
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
			Help: "Runs whose sandbox the daemon could not set up: its own failures, not the caller's (a command the kernel would not execute is invalid).",
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
		egressConns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nsbox_egress_connections_total",
			Help: "Connections and plain-HTTP requests through the egress proxy, allowed or refused.",
		}, []string{"result"}),
		egressBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nsbox_egress_bytes_total",
			Help: "Bytes through the egress proxy: sent (sandbox to upstream) and received.",
		}, []string{"direction"}),
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nsbox_build_info", Help: "1, labelled with the daemon's version and Go version."},
		[]string{"version", "go_version"})
	build.WithLabelValues(version, runtime.Version()).Set(1)
	m.reg.MustRegister(m.runs, m.queueWait, m.runTime, m.spawnFailures, m.zygoteReruns, m.egressConns, m.egressBytes, build,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nsbox_runs_in_flight", Help: "Runs executing now."},
			func() float64 { return float64(adm.InFlight()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nsbox_run_queue_depth", Help: "Runs waiting for a slot."},
			func() float64 { return float64(adm.Queued()) }),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Gatherer is the registry, for a transport to serve.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.reg }

// AddSessions adds the session counters and the live and paused gauges
// read from s.
func (m *Metrics) AddSessions(s Sessions) {
	m.ports = newPortMetrics(m.reg)
	m.reg.MustRegister(m.sessionExecs, m.sessionsEnded, prometheus.NewGaugeFunc(
		prometheus.GaugeOpts{Name: "nsbox_sessions_live", Help: "Sessions whose sandbox is up."},
		func() float64 { return float64(s.Live()) }), prometheus.NewGaugeFunc(
		prometheus.GaugeOpts{Name: "nsbox_sessions_paused", Help: "Live sessions that are paused (frozen: memory kept, no CPU)."},
		func() float64 {
			n := 0
			for _, in := range s.List() {
				if in.State == session.StatePaused {
					n++
				}
			}
			return float64(n)
		}))
}

// AddPool adds the pools' metrics, read from p at each scrape.
func (m *Metrics) AddPool(p Pool) { m.reg.MustRegister(newPoolCollector(p)) }

// AddZygotes adds the zygotes' metrics, read from z at each scrape.
func (m *Metrics) AddZygotes(z Zygotes) { m.reg.MustRegister(newZygoteCollector(z)) }

// Run counts a run request by its outcome: the engine's status, or
// invalid, rejected, setup_error.
func (m *Metrics) Run(status string) { m.runs.WithLabelValues(status).Inc() }

// QueueWait records how long an admitted run waited for its slot.
func (m *Metrics) QueueWait(d time.Duration) { m.queueWait.Observe(d.Seconds()) }

// RunTime records a run's time from spawn to result.
func (m *Metrics) RunTime(d time.Duration) { m.runTime.Observe(d.Seconds()) }

// SpawnFailure counts a run whose sandbox the daemon could not set up
// (never a caller's mistake: see daemon's finished).
func (m *Metrics) SpawnFailure() { m.spawnFailures.Inc() }

// ZygoteRerun counts a run run again because its zygote died under it.
func (m *Metrics) ZygoteRerun() { m.zygoteReruns.Inc() }

// SessionExec counts a session exec by its status.
func (m *Metrics) SessionExec(status string) { m.sessionExecs.WithLabelValues(status).Inc() }

// SessionEnded counts a session that ended, by reason.
func (m *Metrics) SessionEnded(reason string) { m.sessionsEnded.WithLabelValues(reason).Inc() }

// Egress counts one connection (or plain-HTTP request) through the egress
// proxy and its bytes each way.
func (m *Metrics) Egress(allowed bool, sent, received int64) {
	result := "allowed"
	if !allowed {
		result = "refused"
	}
	m.egressConns.WithLabelValues(result).Inc()
	m.egressBytes.WithLabelValues("sent").Add(float64(sent))
	m.egressBytes.WithLabelValues("received").Add(float64(received))
}
