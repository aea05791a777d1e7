//go:build !linux

package httpkit

import "net"

// peerKey names who is on the other end of c: the address without its
// port on TCP; "" (one peer for all) elsewhere.
func peerKey(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return "address " + a.IP.String()
	}
	return ""
}

// hungUp reports false: the peer's end is not looked at here.
func hungUp(net.Conn) bool { return false }
