package server

import (
	"context"
	"net"
)

// PeerCred is the identity of the process on the other end of a Unix socket
// connection (SO_PEERCRED), taken when the connection was accepted.
type PeerCred struct {
	UID, GID uint32
	PID      int32
	Groups   []uint32 // supplementary groups (SO_PEERGROUPS)
}

type peerCredKey struct{}

// withPeerCred is the http.Server's ConnContext: it records the peer's
// credentials, when the transport has them, for per-request logging.
func withPeerCred(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(interface{ Unwrap() net.Conn }); ok {
		c = lc.Unwrap()
	}
	if pc, ok := peerCred(c); ok {
		return context.WithValue(ctx, peerCredKey{}, pc)
	}
	return ctx
}

// PeerCredFrom returns the peer credentials recorded for the request's
// connection, if any.
func PeerCredFrom(ctx context.Context) (PeerCred, bool) {
	pc, ok := ctx.Value(peerCredKey{}).(PeerCred)
	return pc, ok
}
