package ports

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// dialIn connects to 127.0.0.1:port inside the network namespace ns (a
// /proc/PID/ns/net file), as egress.ListenIn listens in one: on a locked
// OS thread that enters the namespace, dials, and returns to the daemon's
// namespace before it is unlocked (a thread that cannot return stays
// locked and dies with its goroutine; see ListenIn for why it must not
// die otherwise). The socket belongs to the sandbox's namespace for its
// whole life, so the connection is one between two of the sandbox's own
// loopback ends: nothing on the host's network takes part, and no
// listener of the daemon's is opened for it. A connection to loopback
// completes or is refused at once; ctx bounds a sandbox too frozen or
// too busy to answer its SYN.
func dialIn(ctx context.Context, ns *os.File, port int) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("ports: the daemon's network namespace: %w", err)}
			return
		}
		defer own.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("ports: enter the sandbox's network namespace: %w", err)}
			return
		}
		var r result
		var d net.Dialer
		r.c, r.err = d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		} else if r.c != nil { // the thread stays locked and ends with this goroutine
			r.c.Close()
			r.c, r.err = nil, fmt.Errorf("ports: return to the daemon's network namespace: %w", err)
		}
		ch <- r
	}()
	r := <-ch
	if errors.Is(r.err, syscall.ECONNREFUSED) {
		return nil, fmt.Errorf("port %d: %w (connection refused on its 127.0.0.1)", port, ErrNoListener)
	}
	return r.c, r.err
}
