package metrics

import "github.com/prometheus/client_golang/prometheus"

// portMetrics count the daemon's connections to sessions' ports
// (daemon/ports).
type portMetrics struct {
	conns prometheus.Counter
	sent  prometheus.Counter
	recvd prometheus.Counter
}

func newPortMetrics(reg *prometheus.Registry) portMetrics {
	conns := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nsbox_port_connections_total",
		Help: "Connections the daemon made to sessions' ports (/v1 port routes, E2B hosts, nsbox session port).",
	})
	bytes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nsbox_port_bytes_total",
		Help: "Bytes through the daemon's connections to sessions' ports: sent (to the sandbox's server) and received.",
	}, []string{"direction"})
	reg.MustRegister(conns, bytes)
	return portMetrics{conns: conns, sent: bytes.WithLabelValues("sent"), recvd: bytes.WithLabelValues("received")}
}

// PortConn counts one connection to a session's port.
func (m *Metrics) PortConn() { m.ports.conns.Inc() }

// PortBytes counts bytes through connections to sessions' ports.
func (m *Metrics) PortBytes(sent, received int64) {
	if sent > 0 {
		m.ports.sent.Add(float64(sent))
	}
	if received > 0 {
		m.ports.recvd.Add(float64(received))
	}
}
