package egress

import (
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container/sandboxinit"
)

// ListenIn listens on addr (e.g. "127.0.0.1:3128") inside the network
// namespace of process pid, and brings that namespace's lo up first (a
// fresh namespace's lo is down and has no 127.0.0.1 until it is). The
// listener is the daemon's socket; nothing of the host's network is
// joined to the sandbox's, and the host's namespace cannot reach it.
//
// The work happens on a locked OS thread that enters the namespace and
// returns to the daemon's before it is unlocked. It must return rather
// than let the thread die with its goroutine: a sandbox's init is started
// with a parent-death signal, which Linux ties to the thread that forked
// it, and Go reuses threads, so a thread that exits may take a sandbox
// with it. A thread that cannot return stays locked and dies (and a
// sandbox forked from it, if any, is lost, never joined to a wrong
// namespace).
func ListenIn(pid int, addr string) (net.Listener, error) {
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, fmt.Errorf("egress: the sandbox's network namespace: %w", err)
	}
	defer ns.Close()
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("egress: the daemon's network namespace: %w", err)}
			return
		}
		defer own.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("egress: enter the sandbox's network namespace: %w", err)}
			return
		}
		var r result
		if err := sandboxinit.LoopbackUp(); err != nil {
			r.err = fmt.Errorf("egress: bring lo up in the sandbox: %w", err)
		} else {
			r.l, r.err = net.Listen("tcp", addr)
		}
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		} // else the thread stays locked and ends with this goroutine
		ch <- r
	}()
	r := <-ch
	return r.l, r.err
}
