package server

import (
	"net"
	"unsafe"

	"golang.org/x/sys/unix"
)

// peerCred reads the peer's uid, gid and pid (SO_PEERCRED) and its
// supplementary groups (SO_PEERGROUPS), both as they were when it
// connected: no /proc lookup that a reused pid could fool.
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
		cred   *unix.Ucred
		groups []uint32
		gerr   error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, gerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if gerr == nil {
			groups = peerGroups(int(fd))
		}
	}); err != nil || gerr != nil {
		return PeerCred{}, false
	}
	return PeerCred{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid, Groups: groups}, true
}

// peerGroups reads SO_PEERGROUPS (Linux 4.13+); nil when it fails. The
// kernel answers ERANGE with the size it needs when the buffer is short.
func peerGroups(fd int) []uint32 {
	buf := make([]uint32, 64)
	for range 2 {
		n := uint32(len(buf) * 4)
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		switch errno {
		case 0:
			return buf[:n/4]
		case unix.ERANGE:
			buf = make([]uint32, n/4+1)
		default:
			return nil
		}
	}
	return nil
}
