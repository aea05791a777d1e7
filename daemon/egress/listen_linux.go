package egress

import (
	"fmt"
	"net"
	"os"

	"github.com/nsbox/nsbox/container/sandboxinit"
	"github.com/nsbox/nsbox/daemon/netns"
)

// ListenIn listens on addr (e.g. "127.0.0.1:3128") inside the network
// namespace of process pid, and brings that namespace's lo up first (a
// fresh namespace's lo is down and has no 127.0.0.1 until it is). The
// listener is the daemon's socket; nothing of the host's network is
// joined to the sandbox's, and the host's namespace cannot reach it.
//
// The work happens inside the namespace through netns.Do.
func ListenIn(pid int, addr string) (net.Listener, error) {
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, fmt.Errorf("egress: the sandbox's network namespace: %w", err)
	}
	defer ns.Close()
	var l net.Listener
	var lerr error
	if err := netns.Do(ns, func() {
		if lerr = sandboxinit.LoopbackUp(); lerr != nil {
			lerr = fmt.Errorf("egress: bring lo up in the sandbox: %w", lerr)
			return
		}
		l, lerr = net.Listen("tcp", addr)
	}); err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	return l, lerr
}
