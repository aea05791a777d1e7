package sessions

import (
	"context"
	"net"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/ports"
)

// DialPort connects to 127.0.0.1:port inside session id's sandbox, for a
// caller that may use the session (another uid's is not found, as
// everywhere). The connection is the daemon's own, made in the sandbox's
// network namespace (package ports); it counts in the session's record
// and closes when the sandbox ends. A paused session's server answers
// once it is resumed; a parked one is revived first by an exec or a
// revive, as for its files (errParked).
func (k *Keeper) DialPort(ctx context.Context, id string, port int) (net.Conn, error) {
	sess, err := k.session(ctx, id)
	if err != nil {
		return nil, err
	}
	sb := sess.Sandbox()
	return k.ports.Dial(ctx, id, ports.Target{Pid: sb.Pid(), Done: sb.Done()}, port)
}

// portStats is the wire form of id's port connections (nil: none).
func (k *Keeper) portStats(id string) *agentapi.PortStats {
	st, ok := k.ports.Stats(id)
	if !ok {
		return nil
	}
	return &agentapi.PortStats{Connections: st.Connections, Open: st.Open, BytesSent: st.Sent, BytesReceived: st.Received}
}
