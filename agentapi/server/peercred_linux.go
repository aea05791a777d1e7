package server

import (
	"net"

	"golang.org/x/sys/unix"
)

func peerCred(c net.Conn) (PeerCred, bool) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return PeerCred{}, false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return PeerCred{}, false
	}
	var (
		cred *unix.Ucred
		gerr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, gerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || gerr != nil {
		return PeerCred{}, false
	}
	return PeerCred{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid}, true
}
