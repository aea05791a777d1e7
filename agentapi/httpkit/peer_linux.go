package httpkit

import (
	"net"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerKey names who is on the other end of c, for the per-peer budget:
// the uid (SO_PEERCRED) on a Unix socket, the address without its port
// on TCP; "" when neither can be told.
func peerKey(c net.Conn) string {
	switch c := c.(type) {
	case *net.UnixConn:
		raw, err := c.SyscallConn()
		if err != nil {
			return ""
		}
		var cred *unix.Ucred
		var gerr error
		if err := raw.Control(func(fd uintptr) {
			cred, gerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		}); err != nil || gerr != nil {
			return ""
		}
		return "uid " + strconv.FormatUint(uint64(cred.Uid), 10)
	case *net.TCPConn:
		if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			return "address " + a.IP.String()
		}
	}
	return ""
}

// hungUp reports whether c's peer has closed its end (POLLRDHUP, which
// Unix and TCP sockets set even with unread data before the end), without
// reading: a parked connection whose client gave up is closed without a
// turn.
func hungUp(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var revents int16
	if err := raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		if n, err := unix.Poll(fds, 0); n == 1 && err == nil {
			revents = fds[0].Revents
		}
	}); err != nil {
		return false
	}
	return revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
}
