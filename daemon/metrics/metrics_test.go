package metrics

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/pool"
	"github.com/nsbox/nsbox/container/session"
	"github.com/nsbox/nsbox/container/zygote"
)

type fakeAdmission struct{ inFlight, queued int }

func (a fakeAdmission) InFlight() int { return a.inFlight }
func (a fakeAdmission) Queued() int   { return a.queued }

type fakePool struct{}

func (fakePool) Stats() []pool.Stats {
	counts := make([]uint64, len(pool.RefillBuckets()))
	counts[0] = 2
	return []pool.Stats{{Name: "default", Size: 2, Ready: 1, Hits: 5, Refills: 2, RefillSum: time.Millisecond, RefillCounts: counts}}
}
func (fakePool) Unmatched() uint64 { return 3 }

type fakeZygotes struct{}

func (fakeZygotes) Stats() []zygote.Stats {
	return []zygote.Stats{{Rootfs: "default", State: "ready", Forks: 4}, {Rootfs: "default", Lean: true, State: "starting"}}
}

type fakeSessions struct{ states []session.State }

func (s fakeSessions) Live() int { return len(s.states) }
func (s fakeSessions) List() []session.Info {
	var out []session.Info
	for _, st := range s.states {
		out = append(out, session.Info{State: st})
	}
	return out
}

// full is a Metrics with everything registered and every vector touched,
// so that each family appears in a scrape.
func full(t *testing.T) *Metrics {
	t.Helper()
	m := New("v1.2.3", fakeAdmission{inFlight: 2, queued: 1})
	m.AddSessions(fakeSessions{states: []session.State{session.StateIdle, session.StatePaused}})
	m.AddPool(fakePool{})
	m.AddZygotes(fakeZygotes{})
	m.Run("ok")
	m.SessionExec("ok")
	m.SessionEnded("killed")
	m.Egress(true, 10, 20)
	m.Egress(false, 0, 0)
	m.PortConn()
	m.PortBytes(30, 0)
	m.PortBytes(0, 40)
	return m
}

// scrape gathers m and returns, per series, "name{label=value,...} value"
// (counters and gauges) or "name{...} count" (histograms), and per family
// "name TYPE help [labels]".
func scrape(t *testing.T, m *Metrics) (series map[string]float64, families []string) {
	t.Helper()
	mfs, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	series = map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "nsbox_") {
			continue
		}
		var names []string
		for _, s := range mf.GetMetric() {
			var ls, ns []string
			for _, l := range s.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
				ns = append(ns, l.GetName())
			}
			key := mf.GetName() + "{" + strings.Join(ls, ",") + "}"
			switch {
			case s.GetCounter() != nil:
				series[key] = s.GetCounter().GetValue()
			case s.GetGauge() != nil:
				series[key] = s.GetGauge().GetValue()
			case s.GetHistogram() != nil:
				series[key] = float64(s.GetHistogram().GetSampleCount())
			}
			if names == nil {
				names = ns
			} else if !slices.Equal(names, ns) {
				t.Errorf("%s: series with labels %v and %v", mf.GetName(), names, ns)
			}
		}
		families = append(families, fmt.Sprintf("%s %s %q %v", mf.GetName(), mf.GetType(), mf.GetHelp(), names))
	}
	return series, families
}

// TestNames pins every metric's name, type, help and label names:
// operators' dashboards and alerts match on them.
func TestNames(t *testing.T) {
	_, got := scrape(t, full(t))
	want := []string{
		`nsbox_build_info GAUGE "1, labelled with the daemon's version and Go version." [go_version version]`,
		`nsbox_egress_bytes_total COUNTER "Bytes through the egress proxy: sent (sandbox to upstream) and received." [direction]`,
		`nsbox_egress_connections_total COUNTER "Connections and plain-HTTP requests through the egress proxy, allowed or refused." [result]`,
		`nsbox_pool_discarded_total COUNTER "Pooled runners that died while waiting and were replaced." [pool]`,
		`nsbox_pool_hits_total COUNTER "Python runs and sessions that took a warm runner." [pool]`,
		`nsbox_pool_misses_total COUNTER "Python runs and sessions matching a pool that found no runner ready (started cold)." [pool]`,
		`nsbox_pool_ready GAUGE "Runners ready in a pool now." [pool]`,
		`nsbox_pool_refill_duration_seconds HISTOGRAM "Time to start one pooled runner, pre-imports included." [pool]`,
		`nsbox_pool_refill_failures_total COUNTER "Pool refills that failed." [pool]`,
		`nsbox_pool_replaced_total COUNTER "Runners started cold that were replaced by zygote children once the zygote was ready." [pool]`,
		`nsbox_pool_size GAUGE "Runners a pool keeps ready." [pool]`,
		`nsbox_pool_unmatched_total COUNTER "Python runs and sessions no pool profile matched (started cold)." []`,
		`nsbox_port_bytes_total COUNTER "Bytes through the daemon's connections to sessions' ports: sent (to the sandbox's server) and received." [direction]`,
		`nsbox_port_connections_total COUNTER "Connections the daemon made to sessions' ports (/v1 port routes, E2B hosts, nsbox session port)." []`,
		`nsbox_run_duration_seconds HISTOGRAM "Time from spawn to result, including teardown." []`,
		`nsbox_run_queue_depth GAUGE "Runs waiting for a slot." []`,
		`nsbox_run_queue_wait_seconds HISTOGRAM "Time admitted runs waited for a run slot." []`,
		`nsbox_runs_in_flight GAUGE "Runs executing now." []`,
		`nsbox_runs_total COUNTER "Run requests by outcome: the engine's status, or invalid, rejected (429), setup_error." [status]`,
		`nsbox_session_execs_total COUNTER "Session execs by status (ok, exception, timeout, cancelled, oom, crashed)." [status]`,
		`nsbox_sessions_ended_total COUNTER "Sessions ended, by reason (killed: deleted, expired or shut down; oom; crashed; timeout)." [reason]`,
		`nsbox_sessions_live GAUGE "Sessions whose sandbox is up." []`,
		`nsbox_sessions_paused GAUGE "Live sessions that are paused (frozen: memory kept, no CPU)." []`,
		`nsbox_spawn_failures_total COUNTER "Runs whose sandbox the daemon could not set up: its own failures, not the caller's (a command the kernel would not execute is invalid)." []`,
		`nsbox_zygote_children GAUGE "Children of the zygote alive now." [rootfs zygote]`,
		`nsbox_zygote_fallbacks_total COUNTER "Runs the zygote should have taken that started cold (it was down, full or its child failed verification)." [rootfs zygote]`,
		`nsbox_zygote_forks_total COUNTER "Python runs and sessions served by a child of the zygote." [rootfs zygote]`,
		`nsbox_zygote_ready GAUGE "1 while the rootfs's zygote is ready to fork." [rootfs zygote]`,
		`nsbox_zygote_reruns_total COUNTER "Python runs run again because their zygote died under them before they answered." []`,
		`nsbox_zygote_restarts_total COUNTER "Times the zygote died and was restarted." [rootfs zygote]`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("metric families changed:\ngot\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestValues checks that each metric reads what it reports on.
func TestValues(t *testing.T) {
	got, _ := scrape(t, full(t))
	for key, want := range map[string]float64{
		`nsbox_runs_in_flight{}`:                                                2,
		`nsbox_run_queue_depth{}`:                                               1,
		`nsbox_runs_total{status=ok}`:                                           1,
		`nsbox_sessions_live{}`:                                                 2,
		`nsbox_sessions_paused{}`:                                               1,
		`nsbox_sessions_ended_total{reason=killed}`:                             1,
		`nsbox_egress_connections_total{result=allowed}`:                        1,
		`nsbox_egress_connections_total{result=refused}`:                        1,
		`nsbox_egress_bytes_total{direction=sent}`:                              10,
		`nsbox_egress_bytes_total{direction=received}`:                          20,
		`nsbox_port_connections_total{}`:                                        1,
		`nsbox_port_bytes_total{direction=sent}`:                                30,
		`nsbox_port_bytes_total{direction=received}`:                            40,
		`nsbox_pool_hits_total{pool=default}`:                                   5,
		`nsbox_pool_refill_duration_seconds{pool=default}`:                      2,
		`nsbox_pool_unmatched_total{}`:                                          3,
		`nsbox_zygote_ready{rootfs=default,zygote=main}`:                        1,
		`nsbox_zygote_ready{rootfs=default,zygote=lean}`:                        0,
		`nsbox_zygote_forks_total{rootfs=default,zygote=main}`:                  4,
		`nsbox_build_info{go_version=` + runtime.Version() + `,version=v1.2.3}`: 1,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
		}
	}
}

// TestRuntimeCollectors checks that the Go runtime's and the process's
// metrics are served beside the daemon's.
func TestRuntimeCollectors(t *testing.T) {
	mfs, err := New("", fakeAdmission{}).Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	for _, want := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if !slices.Contains(names, want) {
			t.Errorf("no %s in %v", want, names)
		}
	}
}
