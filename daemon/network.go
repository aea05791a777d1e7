package daemon

import (
	"net"
	"strings"
	"sync"

	"golang.org/x/net/netutil"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/daemon/egress"
	"github.com/nsbox/nsbox/daemon/policy"
)

// Where a sandbox with a network policy finds the daemon's proxy: on
// 127.0.0.1 in its own network namespace, and the CA bundle it trusts when
// the proxy terminates TLS for its secrets' hosts.
const (
	egressAddr     = "127.0.0.1:3128"
	egressCAFile   = ".nsbox/ca-bundle.pem" // relative to /workspace
	egressCABundle = "/workspace/" + egressCAFile
	// egressConns is how many connections one sandbox may have open to
	// its proxy at once.
	egressConns = 128
)

// pipEnv makes `pip install` work in a sandbox: into the user site under
// /workspace (the rootfs is read-only, so PEP 668's guard has nothing to
// protect), without a cache of its own (the daemon's proxy keeps the
// shared one) or a version check.
var pipEnv = []string{"PIP_BREAK_SYSTEM_PACKAGES=1", "PIP_USER=1", "PIP_NO_CACHE_DIR=1", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1"}

// netRun is the egress of one sandbox: its proxy, the listener inside
// the sandbox, and the records of connections that ended, until taken.
type netRun struct {
	id    string
	proxy *egress.Proxy
	wire  *agentapi.Network // the policy, for a session's description

	mu      sync.Mutex
	ln      net.Listener
	records []egress.Record
}

// onEgressRecord sees every record as its connection ends: it counts it,
// logs it, and keeps it for its run's result.
func (d *Daemon) onEgressRecord(id string, r egress.Record) {
	d.metrics.Egress(r.Allowed, r.Sent, r.Received)
	attrs := []any{"run", id, "host", r.Host, "port", r.Port, "addr", r.Addr, "method", r.Method,
		"allowed", r.Allowed, "sent", r.Sent, "received", r.Received}
	if r.Reason != "" {
		attrs = append(attrs, "reason", r.Reason)
	}
	if r.Cached {
		attrs = append(attrs, "cached", true)
	}
	d.log.Info("egress", attrs...)
	if nr := d.egressRun(id); nr != nil {
		nr.mu.Lock()
		nr.records = append(nr.records, r)
		nr.mu.Unlock()
	}
}

// startEgress sets spec up for policy p: a proxy whose listener the
// sandbox's BeforeStart creates in its network namespace, the proxy's
// environment, and the CA bundle when the proxy terminates TLS. nil p:
// nothing (loopback only). The caller ends it with stop.
func (d *Daemon) startEgress(spec *container.Spec, p *egress.Policy) (*netRun, error) {
	if p == nil {
		return nil, nil
	}
	if d.egressOpts == nil {
		return nil, ErrNoNetwork
	}
	px, err := egress.New(d.egressOpts, spec.ID, *p)
	if err != nil {
		return nil, err
	}
	nr := &netRun{id: spec.ID, proxy: px, wire: policy.WireNetwork(p)}
	bundle := ""
	if ca := px.CABundle(); ca != nil {
		bundle = egressCABundle
		spec.Files = append(spec.Files, container.File{Path: egressCAFile, Data: ca, Mode: 0o444})
	}
	spec.Env = append(append(append([]string(nil), spec.Env...), px.Env(egressAddr, bundle)...), pipEnv...)
	spec.BeforeStart = nr.listen
	d.egressMu.Lock()
	d.egressRuns[spec.ID] = nr
	d.egressMu.Unlock()
	return nr, nil
}

// egressRun returns the live egress of a run or session, or nil.
func (d *Daemon) egressRun(id string) *netRun {
	d.egressMu.Lock()
	defer d.egressMu.Unlock()
	return d.egressRuns[id]
}

// listen creates the proxy's listener in pid's network namespace and
// serves it; a sandbox started again for the same run (a zygote rerun)
// replaces the first's.
func (nr *netRun) listen(pid int) error {
	l, err := egress.ListenIn(pid, egressAddr)
	if err != nil {
		return err
	}
	// A sandbox may open connections to its proxy faster than it uses
	// them; past egressConns open at once, the rest wait in the kernel's
	// backlog, so the daemon's descriptors stay bounded whatever it does.
	l = netutil.LimitListener(l, egressConns)
	nr.mu.Lock()
	if nr.ln != nil {
		nr.ln.Close()
	}
	nr.ln = l
	nr.mu.Unlock()
	go nr.proxy.Serve(l)
	return nil
}

// take returns the records kept since the last take, as the wire's
// report; final closes the proxy first (its last connections end and
// are recorded) and adds its cap.
func (d *Daemon) takeEgress(nr *netRun, final bool) *agentapi.NetworkReport {
	if nr == nil {
		return nil
	}
	var capped string
	if final {
		rep := nr.proxy.Close()
		capped = rep.Capped
		d.egressMu.Lock()
		delete(d.egressRuns, nr.id)
		d.egressMu.Unlock()
	}
	nr.mu.Lock()
	recs := nr.records
	nr.records = nil
	nr.mu.Unlock()
	out := &agentapi.NetworkReport{Capped: capped, Records: make([]agentapi.NetworkRecord, 0, len(recs))}
	for _, r := range recs {
		if r.Allowed {
			out.Connections++
		} else {
			out.Refused++
		}
		out.BytesSent += r.Sent
		out.BytesReceived += r.Received
		if r.Reason != "" && out.Capped == "" && isCap(r.Reason) {
			out.Capped = r.Reason
		}
		out.Records = append(out.Records, agentapi.NetworkRecord{
			Host: r.Host, Port: r.Port, Addr: r.Addr, Method: r.Method, Sent: r.Sent, Received: r.Received,
			Allowed: r.Allowed, Reason: r.Reason, Secrets: r.Secrets, Cached: r.Cached,
		})
	}
	return out
}

// isCap says whether a record's reason is a cap's.
func isCap(reason string) bool { return strings.Contains(reason, " cap of ") }
