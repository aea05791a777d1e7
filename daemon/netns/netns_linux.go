// Package netns runs the daemon's code inside a sandbox's network
// namespace: the egress listener and the connections to a session's
// ports are made there, so nothing of the host's network is joined to
// the sandbox's.
package netns

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs f on a locked OS thread that has entered the network namespace
// ns (an open /proc/PID/ns/net), and returns the thread to the daemon's
// namespace before it is unlocked. A socket f makes belongs to ns for its
// whole life, whichever thread uses it later.
//
// The thread must return rather than die with its goroutine: a sandbox's
// init is started with a parent-death signal, which Linux ties to the
// thread that forked it, and Go reuses threads, so a thread that exits
// may take a sandbox with it. A thread that cannot return stays locked
// and dies (and a sandbox forked from it, if any, is lost, never joined
// to a wrong namespace). The error is Do's own (ns could not be
// entered); f reports its own through its closure.
func Do(ns *os.File, f func()) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("the daemon's network namespace: %w", err)
			return
		}
		defer own.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter the sandbox's network namespace: %w", err)
			return
		}
		f()
		if unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		} // else the thread stays locked and ends with this goroutine
		errc <- nil
	}()
	return <-errc
}
