package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nsbox/nsbox/container/session"
)

// sessionMetrics count session execs and endings.
type sessionMetrics struct {
	execs *prometheus.CounterVec
	ended *prometheus.CounterVec
}

func newSessionMetrics() *sessionMetrics {
	return &sessionMetrics{
		execs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nsbox_session_execs_total",
			Help: "Session execs by status (ok, exception, timeout, cancelled, oom, crashed).",
		}, []string{"status"}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nsbox_sessions_ended_total",
			Help: "Sessions ended, by reason (killed: deleted, expired or shut down; oom; crashed; timeout).",
		}, []string{"reason"}),
	}
}

// register adds the counters and the live-sessions gauge to reg.
func (m *sessionMetrics) register(reg *prometheus.Registry, mgr *session.Manager) {
	reg.MustRegister(m.execs, m.ended, prometheus.NewGaugeFunc(
		prometheus.GaugeOpts{Name: "nsbox_sessions_live", Help: "Sessions whose sandbox is up."},
		func() float64 { return float64(mgr.Live()) }))
}
