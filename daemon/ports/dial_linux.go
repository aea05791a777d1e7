package ports

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"

	"github.com/nsbox/nsbox/daemon/netns"
)

// dialIn connects to 127.0.0.1:port inside the network namespace ns (a
// /proc/PID/ns/net file), as egress.ListenIn listens in one (netns.Do).
// The socket belongs to the sandbox's namespace for its whole life, so the connection is one between two of the sandbox's own
// loopback ends: nothing on the host's network takes part, and no
// listener of the daemon's is opened for it. A connection to loopback
// completes or is refused at once; ctx bounds a sandbox too frozen or
// too busy to answer its SYN.
func dialIn(ctx context.Context, ns *os.File, port int) (net.Conn, error) {
	var c net.Conn
	var derr error
	if err := netns.Do(ns, func() {
		var d net.Dialer
		c, derr = d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}); err != nil {
		return nil, fmt.Errorf("ports: %w", err)
	}
	if errors.Is(derr, syscall.ECONNREFUSED) {
		return nil, fmt.Errorf("port %d: %w (connection refused on its 127.0.0.1)", port, ErrNoListener)
	}
	return c, derr
}
