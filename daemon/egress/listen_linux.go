package egress

import (
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// ListenIn listens on addr (e.g. "127.0.0.1:3128") inside the network
// namespace of process pid, and brings that namespace's lo up first (a
// fresh namespace's lo is down and has no 127.0.0.1 until it is). The
// listener is the daemon's socket; nothing of the host's network is
// joined to the sandbox's, and the host's namespace cannot reach it.
//
// The work happens on a locked OS thread that enters the namespace and is
// never unlocked, so the Go runtime ends that thread with its goroutine
// instead of handing a thread in the sandbox's namespace to other code.
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
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("egress: enter the sandbox's network namespace: %w", err)}
			return
		}
		if err := loopbackUp(); err != nil {
			ch <- result{err: fmt.Errorf("egress: bring lo up in the sandbox: %w", err)}
			return
		}
		l, err := net.Listen("tcp", addr)
		ch <- result{l, err}
	}()
	r := <-ch
	return r.l, r.err
}

// loopbackUp sets IFF_UP on lo in the calling thread's namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
