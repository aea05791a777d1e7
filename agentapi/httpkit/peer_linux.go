package httpkit

import (
	"net"
	"strconv"

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
