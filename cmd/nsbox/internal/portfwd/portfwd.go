// Package portfwd is `nsbox session port`: a local TCP listener whose
// every connection is joined to a tunnel the daemon opens to a session's
// port (client.DialPort), as `kubectl port-forward` does for a pod.
package portfwd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"

	"github.com/nsbox/nsbox/agentapi/portproxy"
)

// Listen listens on addr, which must be a loopback address: a session's
// port is its owner's, and the listener lets any local user in, so it
// is never opened to the network.
func Listen(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %q: %w (want HOST:PORT, such as 127.0.0.1:8000)", addr, err)
	}
	if ip, err := netip.ParseAddr(host); host != "localhost" && (err != nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("--listen %q: not a loopback address: a session's port is forwarded on this host only (127.0.0.1 or ::1)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w (choose another with --listen 127.0.0.1:N, or 127.0.0.1:0 for any free port)", err)
	}
	return ln, nil
}

// Serve accepts ln's connections until ctx ends, joining each to a tunnel
// from dial; a tunnel that cannot be made is said on log and its
// connection closed. It closes ln and waits for the connections.
func Serve(ctx context.Context, ln net.Listener, dial func(context.Context) (net.Conn, error), log io.Writer) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[net.Conn]struct{}{}
	defer func() {
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		mu.Lock()
		open[c] = struct{}{}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { mu.Lock(); delete(open, c); mu.Unlock() }()
			t, err := dial(ctx)
			if err != nil {
				fmt.Fprintf(log, "nsbox: %v\n", err)
				c.Close()
				return
			}
			portproxy.Join(c, nil, t)
		}()
	}
}
